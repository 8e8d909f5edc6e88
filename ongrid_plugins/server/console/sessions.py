"""Console sessions: who a session cookie belongs to, its CSRF token, and messages for the next page.

A session is made when a valid bearer token is pasted into ``/login`` and lives in this
process only (a restart signs everyone out). The cookie holds a random 256-bit id; the
store keeps only its sha256, so a memory dump of the dict does not hand out sessions.
Sessions end after :data:`IDLE_SECONDS` without a request, or at sign-out.

Two caps keep the store small without letting one person sign others out: an
identity holds at most :data:`PER_IDENTITY` sessions (signing in once more ends that
identity's own least recently used one), and the store holds at most
:data:`MAX_SESSIONS` in all -- when it is full, a new sign-in is refused
(:class:`SessionsFull`), never made room for by ending someone else's session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable

import attrs

from ...core.identity import identity_key
from ..tokens import Principal

__all__ = [
    "COOKIE",
    "IDLE_SECONDS",
    "LOGIN_COOKIE",
    "MAX_SESSIONS",
    "PER_IDENTITY",
    "Session",
    "Sessions",
    "SessionsFull",
    "same_token",
]

COOKIE = "ongrid_session"
LOGIN_COOKIE = "ongrid_login"
IDLE_SECONDS = 8 * 3600.0
#: Sessions in all: a bound on memory, reached only when thousands of people are signed in.
MAX_SESSIONS = 10_000
#: Sessions of one identity (browsers, devices, tabs signed in separately).
PER_IDENTITY = 32


class SessionsFull(Exception):
    """The store holds :data:`MAX_SESSIONS` live sessions: a new one would have to end someone else's."""


@attrs.define
class Session:
    """One signed-in browser: the token's principal, its CSRF token, and pending messages."""

    principal: Principal
    csrf: str
    last_seen: float
    flash: list[tuple[str, str]] = attrs.field(factory=list)
    """``(kind, text)`` messages shown once on the next page (kind: ``ok`` or ``error``)."""

    def say(self, kind: str, text: str) -> None:
        """Show ``text`` on the next page this session sees."""
        self.flash.append((kind, text))

    def take_flash(self) -> list[tuple[str, str]]:
        """The pending messages, now cleared."""
        messages, self.flash = self.flash, []
        return messages


def same_token(given: str | None, expected: str) -> bool:
    """Compare two tokens in constant time; a missing one never matches."""
    return bool(given) and hmac.compare_digest(str(given).encode(), expected.encode())


class Sessions:
    """The sessions of one console, keyed by the sha256 of the cookie value."""

    def __init__(
        self,
        idle: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_sessions: int | None = None,
        per_identity: int = PER_IDENTITY,
    ) -> None:
        self.idle = idle
        self.max_sessions = MAX_SESSIONS if max_sessions is None else max_sessions
        self.per_identity = per_identity
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[bytes, Session] = {}
        self._by_identity: dict[str, set[bytes]] = {}
        """Identity key -> the keys of its sessions (for the per-identity cap)."""

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, principal: Principal) -> tuple[str, Session]:
        """A new session for ``principal``: the cookie value and the session.

        Beyond :attr:`per_identity` sessions, the identity's own least recently used one
        ends. :raises SessionsFull: the store is full of other identities' live sessions.
        """
        cookie = secrets.token_urlsafe(32)
        session = Session(principal, secrets.token_urlsafe(32), self._clock())
        who = identity_key(principal.identity)
        with self._lock:
            self._expire()
            own = self._by_identity.setdefault(who, set())
            while own and len(own) >= self.per_identity:
                self._remove(min(own, key=lambda k: self._sessions[k].last_seen))
            if len(self._sessions) >= self.max_sessions:
                if not own:
                    del self._by_identity[who]
                raise SessionsFull(f"{len(self._sessions)} sessions are live, the most this console keeps")
            self._sessions[_key(cookie)] = session
            own.add(_key(cookie))
        return cookie, session

    def get(self, cookie: str | None) -> Session | None:
        """The live session of ``cookie`` (its idle time restarts), or None."""
        if not cookie or len(cookie) > 128:
            return None
        now = self._clock()
        with self._lock:
            session = self._sessions.get(_key(cookie))
            if session is None:
                return None
            if now - session.last_seen > self.idle:
                self._remove(_key(cookie))
                return None
            session.last_seen = now
            return session

    def alive(self, cookie: str | None) -> bool:
        """Whether ``cookie``'s session still exists and is not idle (without counting as a request)."""
        if not cookie:
            return False
        with self._lock:
            session = self._sessions.get(_key(cookie))
            return session is not None and self._clock() - session.last_seen <= self.idle

    def drop(self, cookie: str | None) -> None:
        """End the session of ``cookie`` (sign-out)."""
        if cookie:
            with self._lock:
                self._remove(_key(cookie))

    def _expire(self) -> None:
        now = self._clock()
        for key in [k for k, s in self._sessions.items() if now - s.last_seen > self.idle]:
            self._remove(key)

    def _remove(self, key: bytes) -> None:
        session = self._sessions.pop(key, None)
        if session is None:
            return
        who = identity_key(session.principal.identity)
        own = self._by_identity.get(who)
        if own is not None:
            own.discard(key)
            if not own:
                del self._by_identity[who]


def _key(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode("utf-8", "surrogateescape")).digest()
