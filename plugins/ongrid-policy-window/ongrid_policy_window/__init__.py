"""The ``policy_window`` plugin: changes only in maintenance windows, and a JSONL copy of every call.

* ``ongrid_check_permission`` votes ``deny`` on a call of a tool whose class is
  in ``classes`` (default: mutating and dangerous) when the current time is in
  no configured window. It only votes on calls, not on listings, so the tools
  a persona sees do not change with the clock. A broken configuration, or no
  window at all, denies those calls (closed, not open), saying why.
* ``ongrid_after_call`` appends one JSON line per call attempt, whatever its
  outcome, to the audit log.

Configuration: a TOML file (``ONGRID_POLICY_WINDOW_CONFIG``, default
``<ongrid config dir>/policy-window.toml``), then the environment, which wins::

    windows = ["Mon-Fri 22:00-06:00", "Sat,Sun 00:00-24:00"]
    timezone = "Europe/Paris"                 # IANA name; default UTC
    classes = ["mutating", "dangerous"]
    audit_log = "/var/log/ongrid/calls.jsonl" # "off" disables it
    include_args = false                      # arguments are left out by default

=================================== ======================================
``ONGRID_POLICY_WINDOW_WINDOWS``     windows separated by ``;``
``ONGRID_POLICY_WINDOW_TIMEZONE``    IANA time zone name
``ONGRID_POLICY_WINDOW_CLASSES``     classes separated by ``,``
``ONGRID_POLICY_WINDOW_AUDIT_LOG``   JSONL file, or ``off``
``ONGRID_POLICY_WINDOW_INCLUDE_ARGS`` ``1`` to log the arguments too
=================================== ======================================
"""

from __future__ import annotations

import datetime
import json
import logging
import os

from ongrid_plugins import Decision, Verdict, hookimpl

from .config import Config, ConfigProblem, load_config

__all__ = ["PLUGIN", "Config", "ConfigProblem", "load_config"]

PLUGIN = "policy_window"
logger = logging.getLogger(__name__)


@hookimpl
def ongrid_check_permission(tool, persona, request):
    """Deny a call of a guarded class outside every maintenance window."""
    if request is None:
        return None
    try:
        config = load_config()
    except ConfigProblem as exc:
        if tool.tool_class.value in ("mutating", "dangerous"):
            return Decision(Verdict.DENY, f"policy-window configuration is broken: {exc}", PLUGIN)
        return None
    if tool.tool_class.value not in config.classes:
        return None
    now = datetime.datetime.now(config.zone)
    window = config.open_window(now)
    if window is not None:
        return None
    if not config.windows:
        reason = "no maintenance window is configured (set ONGRID_POLICY_WINDOW_WINDOWS)"
    else:
        shown = "; ".join(w.text for w in config.windows)
        reason = f"{tool.tool_class.value} calls run only in maintenance windows ({shown} {config.zone_name})"
    return Decision(Verdict.DENY, f"{reason}; now is {now:%a %H:%M}", PLUGIN)


@hookimpl
def ongrid_after_call(request, result):
    """Append one JSON line describing the call attempt to the audit log."""
    try:
        config = load_config()
    except ConfigProblem as exc:
        logger.warning("policy-window: not logging %s: %s", request.tool.name, exc)
        return
    if config.audit_log is None:
        return
    decision = result.decision
    line = {
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
        "call_id": request.call_id,
        "tool": request.tool.name,
        "class": request.tool.tool_class.value,
        "provenance": request.tool.provenance,
        "persona": request.persona.name,
        "caller": request.caller,
        "outcome": result.outcome,
        "ok": result.ok,
        "error": result.error,
        "exit_code": result.exit_code,
        "duration": round(result.duration, 6),
        "args_digest": request.args_digest,
        "decision": decision.to_dict() if decision is not None else None,
    }
    if config.include_args:
        line["args"] = dict(request.args)
    _append(config.audit_log, json.dumps(line, ensure_ascii=False, default=str) + "\n")


def _append(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))  # one write per line: lines of concurrent calls never interleave
    finally:
        os.close(fd)
