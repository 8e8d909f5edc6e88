"""Who made a pack: SSH signatures over its content digest, checked offline against a trust policy.

* The **pack digest** is the sha256 of ``ongrid-pack-v1`` and one line per file
  (``path\\0mode\\0sha256``, sorted), over exactly the files ``skills.lock`` pins
  but the signature file itself (:data:`SIGNATURE`, at the pack's top).
* The **signed message** is ``ongrid-pack-v1\\nname NAME\\ndigest sha256:HEX\\n``: the
  name is signed too, so a pack cannot take another pack's name and keep its signature.
* The **signature** is an SSH signature (``ssh-keygen -Y sign -n ongrid-pack``, the
  format git uses; PROTOCOL.sshsig), Ed25519 keys, verified here in Python with
  ``cryptography``: no network, no subprocess at load.
* The **policy** is ``<config dir>/trust.json``::

      {"require_signed": false,
       "signers": {"acme": {"key": "ssh-ed25519 AAAA... comment", "packs": ["acme-*"]}}}

  ``packs`` (shell patterns, ``["*"]`` by default) says which pack names a signer may
  sign. A pattern is also a requirement: a pack whose name matches some signer's
  pattern loads only when one of those signers signed it.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import os
import re
import stat
import struct
from collections.abc import Mapping
from typing import Any

import attrs

from ..core.userfiles import read_regular_text
from ..errors import ConfigError

__all__ = [
    "NAMESPACE",
    "POLICY_NAME",
    "SIGNATURE",
    "Policy",
    "Verdict",
    "check_signature",
    "pack_digest",
    "read_policy",
    "signed_message",
]

SIGNATURE = "ongrid-pack.sig"
NAMESPACE = "ongrid-pack"
POLICY_NAME = "trust.json"
MAX_POLICY_BYTES = 256 * 1024
MAX_SIGNATURE_BYTES = 16 * 1024
MAX_SIGNERS = 1000
_KEY_RE = re.compile(r"ssh-ed25519 ([A-Za-z0-9+/=]{40,100})(?: [^\n]{0,200})?")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")


def pack_digest(files: Mapping[str, Mapping[str, str]]) -> str:
    """The digest a signature covers, from the lock's file records (the signature file left out)."""
    lines = [
        f"{path}\0{files[path].get('mode', '0000')}\0{files[path]['sha256']}\n"
        for path in sorted(files)
        if path != SIGNATURE
    ]
    return hashlib.sha256(
        ("ongrid-pack-v1\n" + "".join(lines)).encode("utf-8", "surrogateescape")
    ).hexdigest()


def signed_message(name: str, digest: str) -> bytes:
    """What ``ongrid-skills sign`` signs for pack ``name`` of content ``digest``."""
    return f"ongrid-pack-v1\nname {name}\ndigest sha256:{digest}\n".encode()


@attrs.frozen
class Signer:
    """One allowed signer of the policy."""

    name: str
    key: bytes
    """The raw 32-byte Ed25519 public key."""
    packs: tuple[str, ...] = ("*",)

    @property
    def fingerprint(self) -> str:
        """``SHA256:...`` as ``ssh-keygen -l`` prints it."""
        return key_fingerprint(self.key)


@attrs.frozen
class Policy:
    """The operator's trust policy (empty when there is no file)."""

    signers: tuple[Signer, ...] = ()
    require_signed: bool = False
    path: str = ""

    def required_signers(self, pack: str) -> list[Signer]:
        """The signers whose patterns name ``pack`` (and who alone may sign it)."""
        return [s for s in self.signers if s.packs != ("*",) and _matches(pack, s.packs)]


@attrs.frozen
class Verdict:
    """What the signature of one pack says, under a policy."""

    status: str
    """``trusted``, ``unsigned``, ``untrusted`` (valid, by a key the policy does not allow for
    this pack) or ``invalid`` (malformed, over other content, or not a plain file)."""
    signer: str = ""
    """The policy's name for the key, or its fingerprint when the policy does not name it."""
    reason: str = ""
    sha256: str = ""
    """Of the signature file's bytes, when it verified (what a consent records)."""

    def refused(self, policy: Policy, pack: str) -> str:
        """Why the pack may not load under ``policy`` ("" when it may)."""
        if self.status == "invalid":
            return self.reason
        required = policy.required_signers(pack)
        if required and self.status != "trusted":
            names = ", ".join(s.name for s in required)
            return (
                f"the trust policy {policy.path} requires packs named like {pack} to be signed by {names}; "
                + (self.reason or "it is unsigned")
            )
        if policy.require_signed and self.status != "trusted":
            return f"ONGRID_REQUIRE_SIGNED is on and {self.reason or 'it is unsigned'}"
        return ""

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return {"status": self.status, "signer": self.signer, "reason": self.reason}


def key_fingerprint(key: bytes) -> str:
    """``SHA256:<base64>`` of an Ed25519 key, as OpenSSH prints it."""
    blob = _string(b"ssh-ed25519") + _string(key)
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def parse_public_key(text: str) -> bytes:
    """The raw Ed25519 key of an OpenSSH public key line; ``ValueError`` saying why not."""
    match = _KEY_RE.fullmatch(text.strip())
    if not match:
        raise ValueError("not an OpenSSH Ed25519 public key line (ssh-ed25519 AAAA... [comment])")
    blob = base64.b64decode(match.group(1))
    kind, rest = _read_string(blob)
    key, rest = _read_string(rest)
    if kind != b"ssh-ed25519" or len(key) != 32 or rest:
        raise ValueError("not an Ed25519 public key")
    return key


def read_policy(config_dir: str, require_signed: bool = False) -> Policy:
    """The policy in ``<config_dir>/trust.json``; ``require_signed`` (the setting) ORs its own.

    :raises ConfigError: the file exists but is not a policy (too big, not JSON, a wrong
        field): saying where and what; nothing loads as trusted from a policy that cannot be read.
    """
    path = os.path.join(config_dir, POLICY_NAME)
    try:
        if os.path.getsize(path) > MAX_POLICY_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_POLICY_BYTES} bytes; a trust policy is a short list")
        data = json.loads(read_regular_text(path))
    except FileNotFoundError:
        return Policy(require_signed=require_signed, path=path)
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a trust policy") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable trust policy ({exc}); fix or remove it") from None
    try:
        signers, required = _policy_values(data)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}; fix it (docs/trust.md shows the format)") from None
    return Policy(signers, required or require_signed, path)


def _policy_values(data: Any) -> tuple[tuple[Signer, ...], bool]:
    if not isinstance(data, dict) or set(data) - {"require_signed", "signers"}:
        raise ValueError('must be an object with "signers" and "require_signed" only')
    required = data.get("require_signed", False)
    raw = data.get("signers", {})
    if not isinstance(required, bool) or not isinstance(raw, dict) or len(raw) > MAX_SIGNERS:
        raise ValueError(
            f'"require_signed" must be true or false, "signers" an object of {MAX_SIGNERS} at most'
        )
    signers = []
    for name, entry in raw.items():
        if not _NAME_RE.fullmatch(name) or not isinstance(entry, dict) or set(entry) - {"key", "packs"}:
            raise ValueError(f'signer {name[:100]!r}: must be a name with an object of "key" and "packs"')
        packs = entry.get("packs", ["*"])
        if (
            not isinstance(packs, list)
            or not packs
            or not all(isinstance(p, str) and 0 < len(p) <= 100 for p in packs)
        ):
            raise ValueError(f'signer {name}: "packs" must be a list of name patterns')
        try:
            given = entry.get("key")
            key = parse_public_key(given if isinstance(given, str) else "")
        except ValueError as exc:
            raise ValueError(f'signer {name}: "key" is {exc}') from None
        signers.append(Signer(name, key, tuple(packs)))
    return tuple(signers), required


def write_policy(policy: Policy) -> None:
    """Write ``policy`` to its path atomically (mode 0644)."""
    data = {
        "require_signed": policy.require_signed,
        "signers": {
            s.name: {
                "key": "ssh-ed25519 " + base64.b64encode(_string(b"ssh-ed25519") + _string(s.key)).decode(),
                "packs": list(s.packs),
            }
            for s in policy.signers
        },
    }
    os.makedirs(os.path.dirname(policy.path), exist_ok=True)
    tmp = policy.path + f".tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, policy.path)


def check_signature(folder: str, name: str, digest: str, policy: Policy, verified: str = "") -> Verdict:
    """The verdict on the signature of pack ``name`` in ``folder``, whose content digest is ``digest``.

    ``verified`` is the sha256 of a signature file this host verified over this very
    content before (a sealed consent records it, beside the content digest): the same
    bytes are then only parsed for their key, not verified again (what a start would
    spend on ``cryptography`` and one Ed25519 check per pack). The policy is applied anew.
    """
    path = os.path.join(folder, SIGNATURE)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return Verdict("unsigned", reason="it is unsigned")
    except OSError as exc:
        return Verdict("invalid", reason=f"its signature {path} cannot be read ({exc.strerror})")
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SIGNATURE_BYTES:  # lstat: a symlink is not
        return Verdict(
            "invalid",
            reason=f"its signature {path} is not a plain file of {MAX_SIGNATURE_BYTES} bytes at most",
        )
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            data = f.read(MAX_SIGNATURE_BYTES + 1)
        seen = hashlib.sha256(data).hexdigest()
        if verified and seen == verified:
            key = parse_sshsig(data)[0]
        else:
            key = verify_sshsig(data, signed_message(name, digest))
    except (OSError, ValueError) as exc:
        return Verdict("invalid", reason=f"its signature {path} does not verify: {exc}")
    allowed = [s for s in policy.signers if s.key == key]
    label = allowed[0].name if allowed else key_fingerprint(key)
    required = policy.required_signers(name)  # a pattern naming this pack: only they may sign it
    fits = [s for s in allowed if (s in required if required else _matches(name, s.packs))]
    if fits:
        return Verdict("trusted", fits[0].name, sha256=seen)
    if allowed:
        return Verdict("untrusted", label, f"its signer {label} may not sign packs named {name}", seen)
    return Verdict("untrusted", label, f"its signer {label} is not in the trust policy {policy.path}", seen)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


# -- the SSH signature format (PROTOCOL.sshsig) ---------------------------------------------------


def verify_sshsig(armored: bytes, message: bytes) -> bytes:
    """Check an armored SSH signature of ``message`` in namespace :data:`NAMESPACE`; return the raw key.

    :raises ValueError: saying what is wrong (armor, fields, namespace, algorithm, signature).
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    key, namespace, reserved, hash_alg, raw = parse_sshsig(armored)
    digest = hashlib.new(hash_alg.decode(), message).digest()
    signed = b"SSHSIG" + _string(namespace) + _string(reserved) + _string(hash_alg) + _string(digest)
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(raw, signed)
    except InvalidSignature:
        raise ValueError("the signature is not over this pack's content (or the file was altered)") from None
    return key


def parse_sshsig(armored: bytes) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """``(raw key, namespace, reserved, hash algorithm, raw signature)`` of an armored SSH
    signature, every field checked but the signature itself; ``ValueError`` saying what is wrong."""
    text = armored.decode("ascii", "replace").strip().splitlines()
    if (
        len(text) < 3
        or text[0] != "-----BEGIN SSH SIGNATURE-----"
        or text[-1] != "-----END SSH SIGNATURE-----"
    ):
        raise ValueError("not an armored SSH signature")
    try:
        blob = base64.b64decode("".join(text[1:-1]), validate=True)
    except ValueError:
        raise ValueError("its base64 is broken") from None
    if blob[:6] != b"SSHSIG" or blob[6:10] != b"\0\0\0\1":
        raise ValueError("not an SSHSIG version 1 blob")
    pub, rest = _read_string(blob[10:])
    namespace, rest = _read_string(rest)
    reserved, rest = _read_string(rest)
    hash_alg, rest = _read_string(rest)
    sig, rest = _read_string(rest)
    if rest:
        raise ValueError("trailing bytes after the signature")
    kind, key_rest = _read_string(pub)
    key, key_rest = _read_string(key_rest)
    if kind != b"ssh-ed25519" or len(key) != 32 or key_rest:
        raise ValueError("only Ed25519 keys are accepted")
    if namespace != NAMESPACE.encode():
        raise ValueError(f"signed for namespace {namespace.decode('ascii', 'replace')!r}, not {NAMESPACE!r}")
    if hash_alg not in (b"sha512", b"sha256"):
        raise ValueError("unknown hash algorithm")
    sig_kind, sig_rest = _read_string(sig)
    raw, sig_rest = _read_string(sig_rest)
    if sig_kind != b"ssh-ed25519" or sig_rest:
        raise ValueError("not an Ed25519 signature")
    return key, namespace, reserved, hash_alg, raw


def _read_string(data: bytes) -> tuple[bytes, bytes]:
    if len(data) < 4:
        raise ValueError("truncated")
    (size,) = struct.unpack(">I", data[:4])
    if size > len(data) - 4:
        raise ValueError("truncated")
    return data[4 : 4 + size], data[4 + size :]


def _string(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value
