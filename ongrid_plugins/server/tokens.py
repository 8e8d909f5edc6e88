"""Bearer tokens of the REST API: a JSON file of token hashes, each naming an identity and a persona.

The file (``ongrid-skills serve --tokens FILE``)::

    {
      "tokens": [
        {"identity": "alice", "persona": "operator", "hash": "sha256:9f86d081884c7d65...", "note": "laptop"},
        {"identity": "bob", "persona": "admin", "hash": "sha256:60303ae22b998861..."}
      ]
    }

Only the sha256 of each token is stored. Tokens are 256-bit random strings
(:func:`new_token`), so an unsalted hash is enough: there is no dictionary to try. A
presented token is hashed and compared with *every* stored hash in constant time
(:func:`hmac.compare_digest`), so the time taken says nothing about which one matched.
``ongrid-skills serve --new-token NAME --persona P --tokens FILE`` adds one,
``--list-tokens`` lists them (identities, personas, hashes: never a token) and
``--revoke-token IDENTITY|HASH`` removes them; ``--hash-token`` prints the hash of a
token read from standard input. A running server reads the file when it starts:
restart it after a revocation.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Iterable
from typing import Any

import attrs

from ..core.identity import identity_problem, normalize_identity
from ..core.userfiles import read_regular_text
from ..errors import ConfigError

__all__ = [
    "Principal",
    "TokenStore",
    "add_token",
    "hash_token",
    "list_tokens",
    "new_token",
    "revoke_token",
]

_HASH = re.compile(r"sha256:([0-9a-f]{64})")
_KEYS = {"identity", "persona", "hash", "note"}
#: Longer bearer values are refused without hashing them.
MAX_TOKEN_LENGTH = 1024


@attrs.frozen
class Principal:
    """Who a token belongs to: an identity (calls, approvals, the audit log) and a persona (the gate)."""

    identity: str
    persona: str


def new_token() -> str:
    """A fresh random token (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What the token file stores for ``token``: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    """Token hashes and their principals; :meth:`authenticate` finds a token's owner."""

    def __init__(self, entries: Iterable[tuple[str, Principal]] = ()) -> None:
        """``entries`` are ``(hash, principal)`` pairs, hashes as :func:`hash_token` writes them."""
        self._entries: list[tuple[bytes, Principal]] = []
        for digest, principal in entries:
            match = _HASH.fullmatch(digest)
            if match is None:
                message = f"token hash {digest[:20]!r}... is not 'sha256:' and 64 lower-case hex digits"
                raise ConfigError(message)
            self._entries.append((bytes.fromhex(match.group(1)), principal))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<TokenStore {len(self)} tokens>"

    @classmethod
    def single(cls, token: str, identity: str, persona: str) -> TokenStore:
        """A store holding one token (``serve`` without ``--tokens`` makes one for its run)."""
        return cls([(hash_token(token), Principal(identity, persona))])

    @classmethod
    def from_file(cls, path: str) -> TokenStore:
        """Read a token file; :class:`ConfigError` naming the file and the entry when it is wrong."""
        return cls(_read_entries(path))

    def principals(self) -> list[Principal]:
        """Every principal, in file order."""
        return [principal for _digest, principal in self._entries]

    def authenticate(self, token: str) -> Principal | None:
        """The owner of ``token``, or None. Compares against every hash, in constant time each."""
        if not token or len(token) > MAX_TOKEN_LENGTH:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found = None
        for stored, principal in self._entries:
            if hmac.compare_digest(stored, digest):
                found = principal
        return found


def _load(path: str) -> Any:
    """The token file's JSON; a FIFO or device named as it is refused, not blocked on."""
    return json.loads(read_regular_text(path))


def _read_entries(path: str) -> list[tuple[str, Principal]]:
    return _read_checked(path)[1]


def _read_checked(path: str) -> tuple[dict[str, Any], list[tuple[str, Principal]]]:
    """The token file's JSON and its entries, read once: what is checked is what is changed."""
    try:
        data = _load(path)
    except OSError as exc:
        message = f"token file {path}: cannot read it: {exc.strerror or exc}"
        raise ConfigError(message) from None
    except ValueError as exc:
        message = f"token file {path}: not valid JSON: {exc}"
        raise ConfigError(message) from None
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        message = f'token file {path}: expected {{"tokens": [{{"identity", "persona", "hash"}}, ...]}}'
        raise ConfigError(message)
    return data, [_entry(path, index, item) for index, item in enumerate(data["tokens"])]


def _entry(path: str, index: int, item: Any) -> tuple[str, Principal]:
    where = f"token file {path}: tokens[{index}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{where} must be an object")
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        allowed = ", ".join(sorted(_KEYS))
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {allowed})")
    for key in ("identity", "persona", "hash"):
        value = item.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {key!r} must be a non-empty string")
    if _HASH.fullmatch(item["hash"]) is None:
        hint = "make one with `ongrid-skills serve --hash-token`"
        raise ConfigError(f"{where}: 'hash' must be 'sha256:' and 64 lower-case hex digits ({hint})")
    problem = identity_problem(item["identity"])
    if problem is not None:  # "bоb" (Cyrillic о) must not pass for bob when approving
        raise ConfigError(f"{where}: {problem}")
    return item["hash"], Principal(normalize_identity(item["identity"]), item["persona"].strip())


def add_token(path: str, identity: str, persona: str, note: str = "") -> str:
    """Add a fresh token for ``identity`` to the file at ``path`` (created ``0600``); return the token."""
    data: dict[str, Any] = {"tokens": []}
    if os.path.exists(path):
        data = _read_checked(path)[0]  # refuse to append to a broken file
    token = new_token()
    entry = {"identity": identity, "persona": persona, "hash": hash_token(token)}
    if note:
        entry["note"] = note
    data["tokens"].append(entry)
    _entry(path, len(data["tokens"]) - 1, entry)
    _write(path, data)
    return token


def list_tokens(path: str) -> list[dict[str, str]]:
    """The entries of the token file: identity, persona, hash and note (no token is ever stored)."""
    data = _read_checked(path)[0]  # a broken file is an error naming the entry
    return [{"note": "", **{str(k): str(v) for k, v in item.items()}} for item in data["tokens"]]


def revoke_token(path: str, which: str) -> list[dict[str, str]]:
    """Remove the tokens of identity ``which``, or the one whose hash is (or starts with) ``which``.

    A hash may be given whole (``sha256:9f86...``) or as a prefix of at least 8 hex
    digits; a prefix matching several entries is refused. Returns the removed entries.

    :raises ConfigError: nothing matches, or a hash prefix is ambiguous or too short.
    """
    entries = list_tokens(path)
    wanted = which.strip()
    removed = [e for e in entries if e["identity"] == wanted]
    if not removed:
        digits = wanted.removeprefix("sha256:").lower()
        if len(digits) < 8 or not re.fullmatch(r"[0-9a-f]+", digits):
            message = f"token file {path}: no identity {wanted!r}, and it is not a hash (8+ hex digits)"
            raise ConfigError(message)
        removed = [e for e in entries if e["hash"].removeprefix("sha256:").startswith(digits)]
        if len(removed) > 1:
            message = f"token file {path}: {wanted!r} matches {len(removed)} token hashes: give more digits"
            raise ConfigError(message)
        if not removed:
            raise ConfigError(f"token file {path}: no token has the hash {wanted!r}")
    kept = [e for e in entries if e not in removed]
    _write(path, {"tokens": [{k: v for k, v in e.items() if k != "note" or v} for e in kept]})
    return removed


def _write(path: str, data: dict[str, Any]) -> None:
    """Replace the file at ``path`` atomically with ``data``, private to its owner (0600)."""
    temporary = f"{path}.tmp-{os.getpid()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(temporary, path)
