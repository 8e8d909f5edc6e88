"""OpenTelemetry for calls (extra ``[otel]``): a span per call, events, metrics.

Off unless ``ONGRID_OTEL=1`` (``Settings(otel=True)``); then the built-in plugin
``otel`` is registered (``ongrid-skills plugins`` shows it) and implements
``ongrid_before_call`` / ``ongrid_after_call``. Without the setting this module's
OpenTelemetry half is never imported, and nothing of OpenTelemetry with it.

Per call attempt, following OpenTelemetry's GenAI semantic conventions for tool
execution (``execute_tool`` spans), with the tracer and meter of the global providers
the application configured (exporters are the application's business):

* a span ``execute_tool {tool}`` (kind ``INTERNAL``) from the moment the gate decided
  until the outcome: ``gen_ai.operation.name`` = ``execute_tool``, ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` = ``function``,
  ``gen_ai.tool.description``, and ``ongrid.tool.class``, ``ongrid.persona``,
  ``ongrid.decision`` (the gate's verdict), ``ongrid.outcome``, ``ongrid.duration``
  (seconds the tool ran) and, for an attempt that did not succeed, ``error.type`` (the
  outcome) with the span status ``ERROR``. Argument values are never recorded: they
  stay in the audit log, with its redaction;
* span events: ``ongrid.confirmation`` (``asked`` when the call needs one, ``given``
  when it ran with one), ``ongrid.ticket`` (``opened`` with the ticket id when a call
  needs two-person approval, ``refused`` when a ticket could not be used) and
  ``ongrid.approval`` (the ticket executed and how many people approved it);
* metrics: the counter ``ongrid.tool.calls`` (by tool and outcome), the counter
  ``ongrid.tool.refusals`` (by tool and reason: ``denied``, ``needs_confirmation``,
  ``invalid_arguments``...) and the histogram ``ongrid.tool.duration`` (seconds, by tool
  and outcome).

The span's parent is the trace context current where the call is made: the MCP SDK
makes the one a client sends in ``_meta`` current, and REST calls take the W3C
``traceparent`` header (:func:`remote_parent`); a malformed one is ignored (a new
trace starts), as the W3C propagator does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..hookspecs import hookimpl
from ..models import Outcome

if TYPE_CHECKING:
    from ..models import CallRequest, CallResult
    from ..settings import Settings

__all__ = ["MODULE", "NAME", "Telemetry", "plugin", "remote_parent"]

NAME = "otel"
MODULE = "ongrid_plugins.audit.telemetry"
_SCOPE = "ongrid_plugins"
_OK = Outcome.OK
#: Outcomes that are the gate or the checks refusing, not the tool failing.
_REFUSALS = frozenset(
    {
        Outcome.DENIED,
        Outcome.NEEDS_CONFIRMATION,
        Outcome.NEEDS_APPROVAL,
        Outcome.TICKET_REFUSED,
        Outcome.INVALID_ARGUMENTS,
        Outcome.UNAVAILABLE,
    }
)


def plugin() -> Telemetry:
    """The plugin object (imports OpenTelemetry: the ``[otel]`` extra)."""
    try:
        import opentelemetry.metrics
        import opentelemetry.trace  # noqa: F401
    except ImportError as exc:
        from ..errors import ConfigError

        raise ConfigError(
            "ONGRID_OTEL is on but OpenTelemetry is not installed: pip install 'ongrid-plugins[otel]'"
        ) from exc
    return Telemetry()


@contextlib.contextmanager
def remote_parent(settings: Settings, headers: Mapping[str, str]) -> Iterator[None]:
    """Make the trace context of ``headers`` (``traceparent``, ``tracestate``) current
    while the block runs, when telemetry is on; otherwise do nothing (and import nothing)."""
    if not settings.otel or "traceparent" not in headers:
        yield
        return
    try:
        from opentelemetry import context, propagate
    except ImportError:
        yield
        return
    token = context.attach(propagate.extract({k.lower(): v for k, v in headers.items()}))
    try:
        yield
    finally:
        context.detach(token)


class Telemetry:
    """The ``otel`` plugin: spans, events and metrics from the call hooks."""

    def __init__(self) -> None:
        from opentelemetry import metrics, trace

        self._trace = trace
        self._tracer = trace.get_tracer(_SCOPE)
        meter = metrics.get_meter(_SCOPE)
        self._calls = meter.create_counter(
            "ongrid.tool.calls", unit="{call}", description="Tool call attempts"
        )
        self._refusals = meter.create_counter(
            "ongrid.tool.refusals", unit="{call}", description="Tool calls refused before they ran, by reason"
        )
        self._duration = meter.create_histogram(
            "ongrid.tool.duration", unit="s", description="Seconds tool calls ran"
        )
        self._spans: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _start(self, request: CallRequest) -> Any:
        tool = request.tool
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.call.id": request.call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.description": tool.description,
            "ongrid.tool.class": tool.tool_class.value,
            "ongrid.persona": request.persona.name,
        }
        kind = self._trace.SpanKind.INTERNAL
        return self._tracer.start_span(f"execute_tool {tool.name}", kind=kind, attributes=attributes)

    @hookimpl
    def ongrid_before_call(self, request: CallRequest) -> None:
        span = self._start(request)
        with self._lock:
            self._spans[id(request)] = span

    @hookimpl
    def ongrid_after_call(self, request: CallRequest, result: CallResult) -> None:
        with self._lock:
            span = self._spans.pop(id(request), None)
        if span is None:  # an attempt that ended before before_call: a span of its own
            span = self._start(request)
        outcome = str(result.outcome)
        tool = request.tool.name
        if result.decision is not None:
            span.set_attribute("ongrid.decision", result.decision.verdict.value)
        span.set_attribute("ongrid.outcome", outcome)
        span.set_attribute("ongrid.duration", float(result.duration))
        self._events(span, request, result, outcome)
        if outcome != _OK:
            span.set_attribute("error.type", outcome)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, outcome))
        span.end()
        labels = {"gen_ai.tool.name": tool, "ongrid.outcome": outcome}
        self._calls.add(1, labels)
        if outcome in _REFUSALS:
            self._refusals.add(1, {"gen_ai.tool.name": tool, "ongrid.reason": outcome})
        else:
            self._duration.record(float(result.duration), labels)

    @staticmethod
    def _events(span: Any, request: CallRequest, result: CallResult, outcome: str) -> None:
        if outcome == Outcome.NEEDS_CONFIRMATION:
            span.add_event("ongrid.confirmation", {"ongrid.confirmation": "asked"})
        elif request.confirm and outcome not in (Outcome.NEEDS_APPROVAL, Outcome.TICKET_REFUSED):
            span.add_event("ongrid.confirmation", {"ongrid.confirmation": "given"})
        if outcome == Outcome.NEEDS_APPROVAL:
            span.add_event(
                "ongrid.ticket", {"ongrid.ticket": "opened", "ongrid.ticket.id": request.ticket or ""}
            )
        elif outcome == Outcome.TICKET_REFUSED:
            span.add_event(
                "ongrid.ticket", {"ongrid.ticket": "refused", "ongrid.ticket.id": request.ticket or ""}
            )
        elif request.ticket and request.approvers:
            attributes = {"ongrid.ticket.id": request.ticket, "ongrid.approvers": len(request.approvers)}
            span.add_event("ongrid.approval", attributes)
