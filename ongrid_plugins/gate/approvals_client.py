"""A client of the REST API's approval routes: ``approvals ... --server URL`` and ``Settings.approvals_url``.

The server decides who is acting: every request carries a bearer token, and the
server signs approvals -- and requests and runs tickets -- as the token's identity,
never as a name the client sends. Only the standard library is used (``urllib``), so
neither the CLI nor an embedding host needs an extra.

:class:`RemoteApprovalStore` is an :class:`~ongrid_plugins.gate.approvals.ApprovalStore`
whose tickets live on a server: a host with ``Settings.approvals_url`` opens its
tickets there (sending the call's arguments, from which the server works out the
digest and the redaction approvers read) and spends them there before it runs the
call, so requesters and approvers on different accounts or machines share one store.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any

from ..core.userfiles import read_regular_text
from ..errors import APPROVAL_REASONS, ApprovalError, ConfigError, OngridError
from .approvals import ApprovalStore
from .tickets import Approval, Ticket, VerifyApproval, _check_skill

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..settings import Settings

__all__ = ["ApprovalsClient", "RemoteApprovalStore", "ServerError", "read_token", "ticket_from_dict"]

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
            lines = read_regular_text(token_file, 64 * 1024).splitlines()
        except OSError as exc:
            raise ConfigError(f"--token-file {token_file}: cannot read it: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"--token-file {token_file}: not UTF-8 ({exc.reason})") from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise ConfigError(f"--token-file {token_file} is empty: it should hold the bearer token")
        return token
    token = os.environ.get("ONGRID_TOKEN", "").strip()
    if not token:
        raise ConfigError("--server needs a token: set ONGRID_TOKEN, or give --token-file FILE")
    return token


def ticket_from_dict(data: dict[str, Any]) -> Ticket:
    """A :class:`Ticket` from its JSON form (:meth:`Ticket.from_dict`)."""
    return Ticket.from_dict(data)


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

    def open_ticket(
        self,
        *,
        tool: str,
        params: Mapping[str, Any],
        persona: str,
        reason: str = "",
        binding: Mapping[str, str] | None = None,
    ) -> Ticket:
        """Open (or find) the ticket for this call, requested by the token's identity.

        ``binding`` (``skill_digest``, ``profile``): the skill files and sandbox profile the
        caller's host runs, which the ticket is bound to instead of the server's own.
        """
        body = {"tool": tool, "params": dict(params), "persona": persona, "reason": reason, **(binding or {})}
        return ticket_from_dict(self._request("POST", "/v1/approvals", body))

    def claim(
        self,
        ticket_id: str,
        *,
        tool: str,
        args_digest: str,
        persona: str,
        call_id: str,
        binding: Mapping[str, str] | None = None,
    ) -> Ticket:
        """Spend the approved ticket for exactly this call (as its requester); ``binding`` as for
        :meth:`open_ticket`: the server refuses (``skill_changed``, ``mismatch``) a ticket bound
        to other files or another profile, and does not spend it."""
        body = {"tool": tool, "args_digest": args_digest, "persona": persona, "call_id": call_id}
        body.update(binding or {})
        return ticket_from_dict(self._request("POST", f"/v1/approvals/{_quote(ticket_id)}/claim", body))

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise _redirected(exc, self.url) from None
            raise _refusal(exc, lookup=not path.endswith("/claim")) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(f"cannot reach {self.url}: {reason}") from None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: urllib's own handler sends the added ``Authorization`` header
    to wherever ``Location`` points (another port, host, or https to http), and turns a
    redirected POST into a GET carrying the token."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None  # the 3xx is raised as an HTTPError, answered by _redirected


_OPENER = urllib.request.build_opener(_NoRedirects)


def _redirected(exc: urllib.error.HTTPError, url: str) -> ServerError:
    where = str(exc.headers.get("Location") or "nowhere")[:200]
    return ServerError(
        f"the server {url} answered {exc.code}, redirecting to {where!r}; not followed, so the token "
        "is sent nowhere else: give the final URL in --server or ONGRID_APPROVALS_URL",
        status=exc.code,
        code="redirect",
    )


def _quote(ticket_id: str) -> str:
    return urllib.parse.quote(ticket_id, safe="")


def _refusal(exc: urllib.error.HTTPError, lookup: bool = True) -> OngridError:
    """The server's refusal as the local store would raise it (``lookup``: a ticket asked for by
    id, whose absence is "not found", exit 4; a call presenting one is denied, exit 3)."""
    try:
        body = json.loads(exc.read())
    except ValueError:
        body = {}
    message = str(body.get("error") or exc.reason)
    code = str(body.get("code", ""))
    if code == ApprovalError.code and body.get("reason") in APPROVAL_REASONS:
        not_found = lookup and body["reason"] == "unknown"
        return ApprovalError(body["reason"], str(body.get("ticket") or ""), message, not_found=not_found)
    if exc.code == 401:
        return ServerError(f"the server refused the token ({message})", status=401, code=code)
    return ServerError(f"the server answered {exc.code}: {message}", status=exc.code, code=code)


class RemoteApprovalStore(ApprovalStore):
    """Tickets kept by an ``ongrid-skills serve`` server, as its token's identity (``approvals_url``).

    Identities are the server's: a ticket's requester, its approvers and who ran it
    are the tokens' identities, whatever ``requester=``, ``approver=`` or ``caller=``
    the host passes. Anything that keeps the server from answering is an
    ``ApprovalError(reason="store")``, as for a local database that cannot be used.
    """

    def __init__(self, url: str, token_file: str = "", *, timeout: float = TIMEOUT) -> None:
        super().__init__(url)
        self.url = url
        self.token_file = token_file
        self.timeout = timeout
        self._client: ApprovalsClient | None = None

    @classmethod
    def for_settings(cls, settings: Settings, witness: Any = None) -> RemoteApprovalStore:
        """The store of ``approvals_url``; the token of ``approvals_token_file``, else ``$ONGRID_TOKEN``.

        ``witness`` is not used: the server checks a ticket against its own audit log as it is claimed.
        """
        return cls(settings.approvals_url, settings.approvals_token_file)

    def __repr__(self) -> str:
        return f"<RemoteApprovalStore {self.url}>"

    def _remote(self) -> ApprovalsClient:
        if self._client is None:
            try:
                self._client = ApprovalsClient(
                    self.url, read_token(self.token_file or None), timeout=self.timeout
                )
            except ConfigError as exc:
                raise ApprovalError("store", "", f"the approvals server {self.url}: {exc}") from None
        return self._client

    def _do(self, action: Any, ticket_id: str = "") -> Any:
        try:
            return action(self._remote())
        except ServerError as exc:
            raise ApprovalError("store", ticket_id, f"the approvals server {self.url}: {exc}") from None

    def ticket(self, ticket_id: str) -> Ticket:
        return self._do(lambda c: c.ticket(ticket_id), ticket_id)  # type: ignore[no-any-return]

    def tickets(self, status: str | None = None) -> list[Ticket]:
        return self._do(lambda c: c.tickets(status))  # type: ignore[no-any-return]

    def open_ticket(
        self,
        *,
        tool: str,
        args_digest: str,
        persona: str,
        requester: str,
        args: Mapping[str, Any],
        tool_class: str = "",
        reason: str = "",
        profile: str = "",
        skill_digest: str = "",
        call_args: Mapping[str, Any] | None = None,
    ) -> Ticket:
        # The ticket is bound to the files and the sandbox profile *this* host runs, not the server's.
        params = call_args if call_args is not None else args
        binding = {"skill_digest": skill_digest, "profile": profile}
        ticket: Ticket = self._do(
            lambda c: c.open_ticket(tool=tool, params=params, persona=persona, reason=reason, binding=binding)
        )
        if ticket.args_digest != args_digest:  # the server read other arguments than this host means
            message = f"the approvals server {self.url} opened ticket {ticket.id} for other arguments"
            raise ApprovalError("mismatch", ticket.id, message)
        self._check_bound(ticket, skill_digest, profile)
        return ticket

    def approve(
        self,
        ticket_id: str,
        *,
        approver: str,
        note: str = "",
        sop: str | None = None,
        verify: VerifyApproval | None = None,
    ) -> Ticket:
        if verify is not None:  # this host's ongrid_verify_approval plugins have their say first
            refused_by = verify(self.ticket(ticket_id), Approval(approver, note, sop))
            if refused_by:
                message = f"the approval of ticket {ticket_id} by {approver} was refused by {refused_by}"
                raise ApprovalError("hook_refused", ticket_id, message)
        return self._do(lambda c: c.approve(ticket_id, note=note, sop=sop), ticket_id)  # type: ignore[no-any-return]

    def reject(self, ticket_id: str, *, approver: str, note: str = "") -> Ticket:
        return self._do(lambda c: c.reject(ticket_id, note=note), ticket_id)  # type: ignore[no-any-return]

    def claim(
        self,
        ticket_id: str,
        *,
        tool: str,
        args_digest: str,
        persona: str,
        caller: str,
        call_id: str,
        profile: str = "",
        skill_digest: str | None = None,
    ) -> Ticket:
        # The server checks the ticket against this host's files and profile inside its claim
        # transaction, so a refused ticket is not spent; the answer is checked again here.
        binding = {"profile": profile}
        if skill_digest is not None:
            binding["skill_digest"] = skill_digest
        ticket: Ticket = self._do(
            lambda c: c.claim(
                ticket_id,
                tool=tool,
                args_digest=args_digest,
                persona=persona,
                call_id=call_id,
                binding=binding,
            ),
            ticket_id,
        )
        self._check_bound(ticket, skill_digest, profile)
        return ticket

    def _check_bound(self, ticket: Ticket, skill_digest: str | None, profile: str) -> None:
        """Refuse a ticket the server did not bind to this host's skill files and sandbox profile
        (a server that predates the binding keeps its own view)."""
        _check_skill(ticket, skill_digest)
        if ticket.profile != profile:
            message = (
                f"the approvals server {self.url} did not bind ticket {ticket.id} to the skill files "
                "and sandbox profile this host runs; upgrade the server (ongrid-skills serve) and "
                "open a new ticket"
            )
            raise ApprovalError("mismatch", ticket.id, message)
