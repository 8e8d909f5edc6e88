"""What the audit log gives back: its rows, a verification report, and the checks they need.

Values and pure functions only (no database, no files but the key file), so the
surfaces that show rows (the CLI, REST, the console) read them without the
writer's machinery.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ..core.userfiles import read_regular
from ..errors import AuditError, ConfigError
from ..models import JSON, Outcome
from .chain import COLUMNS, GENESIS, JSON_COLUMNS

__all__ = [
    "MIN_ANCHOR",
    "MIN_KEY_BYTES",
    "OUTCOMES",
    "AuditEntry",
    "UnreadableLog",
    "VerifyReport",
    "read_key",
]


#: Every ``outcome`` a row may have: the call outcomes, then the two ticket decisions.
OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
#: The shortest anchor prefix ``verify`` accepts (as short as a git abbreviation).
MIN_ANCHOR = 7


@attrs.frozen
class AuditEntry:
    """One row of the audit log: one call attempt."""

    seq: int
    time: float
    """When the attempt started (seconds since the epoch)."""
    call_id: str
    tool: str
    tool_class: str
    persona: str
    caller: str
    args: Any
    """The arguments with secrets replaced by ``"[redacted]"``."""
    args_digest: str
    """The call's args digest; empty when a secret was redacted (a digest could confirm a guess)."""
    redacted: tuple[str, ...]
    """JSON paths of the redacted values."""
    verdict: str
    reason: str
    plugin: str
    outcome: str
    """ok, failed, timed_out, denied, invalid_arguments, needs_confirmation, needs_approval,
    ticket_refused, unavailable, aborted, cancelled or interrupted."""
    error: str | None
    exit_code: int | None
    signal: int | None
    duration: float
    stderr_tail: tuple[str, ...]
    result_size: int
    """Bytes of the canonical JSON of the result value (0 when there was none)."""
    result_digest: str
    ticket: str | None
    approvers: tuple[str, ...]
    pid: int
    hostname: str
    sandbox: Any
    """The confinement profile the call ran under (a dict), ``{"confined": False, "reason": ...}``,
    or None for rows written before profiles were recorded."""
    skill_digest: str | None
    """The content digest of the tool's skill at the call (None in rows older than digests)."""
    remote: Any
    """Where a worker ran the call: ``{"queue", "task_id", "worker", "worker_digest"}``;
    None for a local call (and in rows older than remote workers)."""
    prev_hash: str
    hash: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> AuditEntry:
        """Build an entry from a database row (``COLUMNS`` then ``hash``)."""
        values = dict(zip((*COLUMNS, "hash"), row, strict=True))
        for column in JSON_COLUMNS:
            parsed = _json_or_text(values[column])
            values[column] = parsed if column == "args" else _listed(parsed)
        for column in ("sandbox", "remote"):
            values[column] = _json_or_text(values.get(column))
        return cls(**values)

    def to_dict(self) -> JSON:
        """A JSON-ready dict (``audit list --json``, ``audit export``)."""
        data = attrs.asdict(self)
        for key in ("redacted", "stderr_tail", "approvers"):
            data[key] = list(data[key])
        return data


def _dicts(value: Iterable[JSON]) -> tuple[JSON, ...]:
    return tuple(value)


@attrs.frozen
class VerifyReport:
    """What :meth:`AuditLog.verify` found."""

    ok: bool
    entries: int
    first_bad: int | None = None
    """The seq of the first row that does not verify."""
    problem: str = ""
    head: str = GENESIS
    """The hash of the last row: record it elsewhere to anchor the log (``verify(anchor=...)``)."""
    inflight: tuple[JSON, ...] = attrs.field(default=(), converter=_dicts)
    """Attempts started but not finished (running now, or their host died: see ``recover``)."""

    def to_dict(self) -> JSON:
        """A JSON-ready dict."""
        return attrs.asdict(self)


class UnreadableLog(AuditError):
    """SQLite cannot open or read ``audit.db``: it is damaged, not a database, or not a file."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"the audit log {path} cannot be read ({detail}); {_RESTORE}")

    @property
    def problem(self) -> str:
        """What ``verify`` reports: the chain cannot be checked."""
        return (
            f"the audit log {self.path} is damaged ({self.detail}): the chain cannot be verified; {_RESTORE}"
        )


_RESTORE = (
    "restore it from a copy (keep the damaged file for inspection), or move it aside to start a "
    "new log; `PRAGMA integrity_check` in the sqlite3 shell says more"
)


#: Fewest bytes an audit key may have.
MIN_KEY_BYTES = 16


def read_key(path: str) -> bytes:
    """The audit key in ``path`` (surrounding blanks removed); raises ConfigError."""
    try:
        key = read_regular(path, 4096)[:4096].strip()
    except OSError as exc:
        raise ConfigError(
            f"ONGRID_AUDIT_KEY_FILE {path}: cannot read the audit key: {exc.strerror}"
        ) from None
    if len(key) < MIN_KEY_BYTES:
        message = (
            f"ONGRID_AUDIT_KEY_FILE {path}: the key has {len(key)} bytes, at least {MIN_KEY_BYTES} are needed"
        )
        raise ConfigError(message + " (e.g. `head -c 32 /dev/urandom | base64 > FILE`)")
    return key


def _missing(count: int, recorded: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(recorded.get("time") or 0)))
    seen = f"row {recorded.get('seq')} (hash {recorded['hash']}, recorded {when})"
    if not count:
        return f"the log is empty, but its head {seen} was recorded: rows are missing"
    return f"the recorded head {seen} is not in the chain: rows are missing or were rewritten"


def _json_or_text(value: Any) -> Any:
    """A JSON column's value; its text as it is when it does not parse (a row edited by hand,
    which ``verify`` reports: listing and showing it must not fail on it)."""
    if not value:
        return None
    try:
        return json.loads(value)
    except (TypeError, ValueError, RecursionError):
        return value


def _listed(parsed: Any) -> tuple[Any, ...]:
    if isinstance(parsed, list):
        return tuple(parsed)
    return () if parsed is None else (parsed,)


def check_anchor(anchor: str) -> None:
    """Refuse an anchor that cannot be a row hash (a usage error, not a sign of tampering)."""
    text = anchor.strip().lower()
    if len(text) < MIN_ANCHOR or len(text) > 64 or any(c not in "0123456789abcdef" for c in text):
        raise ConfigError(
            f"the anchor {anchor[:80]!r} is not a row hash: give the full 64-hex-digit hash "
            f"(a head from `audit verify`) or at least {MIN_ANCHOR} of its first digits"
        )


def _anchor_problem(anchor: str, seen: frozenset[str]) -> str:
    """Why ``anchor`` (a hash or a unique prefix of one) does not anchor the chain, or ``""``."""
    text = anchor.strip().lower()
    if text in seen:
        return ""
    matches = [h for h in seen if h.startswith(text)]
    if len(matches) == 1:
        return ""
    if matches:
        count = len(matches)
        return f"the anchor prefix {anchor} matches {count} row hashes: give more digits or the full hash"
    return f"the anchor hash {anchor} is not in the chain"
