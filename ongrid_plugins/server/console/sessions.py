"""Console sessions: who a session cookie belongs to, its CSRF token, and messages for the next page.

A session is made when a valid bearer token is pasted into ``/login`` and lives in this
process only (a restart signs everyone out). The cookie holds a random 256-bit id; the
store keeps only its sha256, so a memory dump of the dict does not hand out sessions.
Sessions end after :data:`IDLE_SECONDS` without a request, or at sign-out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable

import attrs

from ..tokens import Principal

__all__ = ["COOKIE", "IDLE_SECONDS", "LOGIN_COOKIE", "Session", "Sessions", "same_token"]

COOKIE = "ongrid_session"
LOGIN_COOKIE = "ongrid_login"
IDLE_SECONDS = 8 * 3600.0
MAX_SESSIONS = 10_000


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

    def __init__(self, idle: float = IDLE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle = idle
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[bytes, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, principal: Principal) -> tuple[str, Session]:
        """A new session for ``principal``: the cookie value and the session."""
        cookie = secrets.token_urlsafe(32)
        session = Session(principal, secrets.token_urlsafe(32), self._clock())
        with self._lock:
            self._expire()
            if len(self._sessions) >= MAX_SESSIONS:  # the oldest goes first
                oldest = min(self._sessions, key=lambda k: self._sessions[k].last_seen)
                del self._sessions[oldest]
            self._sessions[_key(cookie)] = session
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
                del self._sessions[_key(cookie)]
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
                self._sessions.pop(_key(cookie), None)

    def _expire(self) -> None:
        now = self._clock()
        for key in [k for k, s in self._sessions.items() if now - s.last_seen > self.idle]:
            del self._sessions[key]


def _key(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode("utf-8", "surrogateescape")).digest()
