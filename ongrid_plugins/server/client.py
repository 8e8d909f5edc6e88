"""A small client of the REST API's approval routes, for ``ongrid-skills approvals ... --server URL``.

The server decides who is acting: every request carries a bearer token, and the
server signs approvals with the token's identity, never with a name the client
sends. Only the standard library is used (``urllib``), so the CLI needs no extra.
"""

from __future__ import annotations

import datetime
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..approvals import Approval, Ticket
from ..errors import APPROVAL_REASONS, ApprovalError, ConfigError, OngridError

__all__ = ["ApprovalsClient", "ServerError", "read_token", "ticket_from_dict"]

TIMEOUT = 30.0


class ServerError(OngridError):
    """The server refused a request, or could not be reached; the message says which and why."""

    def __init__(self, message: str, *, status: int = 0, code: str = "") -> None:
        self.status = status
        self.code = code
        self.exit_code = 3 if status == 403 else 2
        super().__init__(message)


def read_token(token_file: str | None) -> str:
    """The bearer token: the first line of ``token_file``, else ``$ONGRID_TOKEN``."""
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except OSError as exc:
            raise ConfigError(f"--token-file {token_file}: cannot read it: {exc.strerror or exc}") from None
        if not token:
            raise ConfigError(f"--token-file {token_file} is empty: it should hold the bearer token")
        return token
    token = os.environ.get("ONGRID_TOKEN", "").strip()
    if not token:
        raise ConfigError("--server needs a token: set ONGRID_TOKEN, or give --token-file FILE")
    return token


def _timestamp(text: Any) -> float:
    if not text:
        return 0.0
    return datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


def ticket_from_dict(data: dict[str, Any]) -> Ticket:
    """A :class:`Ticket` from its JSON form (``Ticket.to_dict``)."""
    approvals = [
        Approval(a["approver"], a.get("note", ""), a.get("sop"), _timestamp(a.get("time")))
        for a in data.get("approvals", [])
    ]
    return Ticket(
        id=data["id"],
        tool=data["tool"],
        args_digest=data["args_digest"],
        persona=data["persona"],
        requester=data["requester"],
        required=int(data.get("required", 2)),
        approvals=approvals,
        status=data["status"],
        created=_timestamp(data.get("created")),
        expires=_timestamp(data.get("expires")),
        rejected_by=data.get("rejected_by"),
        note=data.get("note", ""),
        args=data.get("args", {}),
        tool_class=data.get("tool_class", ""),
        reason=data.get("reason", ""),
        executed=_timestamp(data.get("executed")) or None,
        executed_by=data.get("executed_by"),
        call_id=data.get("call_id"),
    )


class ApprovalsClient:
    """The approval routes of one server, as one token's identity."""

    def __init__(self, url: str, token: str, *, timeout: float = TIMEOUT) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"--server {url!r} is not an http:// or https:// URL")
        self.url = url.rstrip("/")
        self._token = token
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"<ApprovalsClient {self.url}>"

    def tickets(self, status: str | None = None) -> list[Ticket]:
        """Every ticket, newest first (``status`` filters)."""
        query = f"?{urllib.parse.urlencode({'status': status})}" if status else ""
        body = self._request("GET", f"/v1/approvals{query}")
        return [ticket_from_dict(item) for item in body["items"]]

    def ticket(self, ticket_id: str) -> Ticket:
        """One ticket."""
        return ticket_from_dict(self._request("GET", f"/v1/approvals/{_quote(ticket_id)}"))

    def approve(self, ticket_id: str, *, note: str = "", sop: str | None = None) -> Ticket:
        """Approve as the token's identity."""
        body: dict[str, Any] = {"note": note}
        if sop is not None:
            body["sop"] = sop
        return ticket_from_dict(self._request("POST", f"/v1/approvals/{_quote(ticket_id)}/approve", body))

    def reject(self, ticket_id: str, *, note: str = "") -> Ticket:
        """Reject (or, as its requester, withdraw) as the token's identity."""
        return ticket_from_dict(
            self._request("POST", f"/v1/approvals/{_quote(ticket_id)}/reject", {"note": note})
        )

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise _refusal(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(f"cannot reach {self.url}: {reason}") from None


def _quote(ticket_id: str) -> str:
    return urllib.parse.quote(ticket_id, safe="")


def _refusal(exc: urllib.error.HTTPError) -> OngridError:
    try:
        body = json.loads(exc.read())
    except ValueError:
        body = {}
    message = str(body.get("error") or exc.reason)
    code = str(body.get("code", ""))
    if code == "ticket_refused" and body.get("reason") in APPROVAL_REASONS:
        return ApprovalError(body["reason"], str(body.get("ticket") or ""), message)
    if exc.code == 401:
        return ServerError(f"the server refused the token ({message})", status=401, code=code)
    return ServerError(f"the server answered {exc.code}: {message}", status=exc.code, code=code)
