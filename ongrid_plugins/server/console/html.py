"""HTML building blocks of the console: escaping, the page frame, badges, times.

Every value that reaches a page goes through :func:`esc` (text) or :func:`attr`
(attribute values): names, descriptions and arguments come from skill authors and
callers, and must never become markup.
"""

from __future__ import annotations

import datetime
import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["attr", "badge", "esc", "iso", "options", "page", "pretty_json", "relative", "short"]


def esc(value: object) -> str:
    """``value`` as HTML text."""
    return html.escape(str(value), quote=False)


def attr(value: object) -> str:
    """``value`` inside a double-quoted attribute."""
    return html.escape(str(value), quote=True)


def badge(text: str, kind: str = "") -> str:
    """A small label; ``kind`` picks its colour (a tool class, a status, an outcome)."""
    css = "".join(c for c in (kind or text) if c.isalnum() or c in "-_")
    return f'<span class="badge b-{css}">{esc(text)}</span>'


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON, escaped for a ``<pre>``."""
    return esc(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str))


def iso(ts: float | None) -> str:
    """A UTC timestamp, ``2026-12-01 09:30:00Z``; empty for none."""
    if not ts:
        return ""
    moment = datetime.datetime.fromtimestamp(ts, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def relative(seconds: float) -> str:
    """A duration a person reads at a glance: ``14 min 5 s``, ``42 s``, ``2 h 3 min``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


_NAV = (("catalog", "/", "Catalog"), ("approvals", "/approvals", "Approvals"), ("audit", "/audit", "Audit"))


def page(
    title: str,
    body: str,
    *,
    current: str = "",
    who: tuple[str, str] | None = None,
    csrf: str = "",
    flash: list[tuple[str, str]] | None = None,
    live: str = "",
) -> str:
    """A whole page: the header with navigation and sign-out, messages, then ``body``.

    :param who: ``(identity, persona)`` of the signed-in user; None on the sign-in page.
    :param live: The ``/events`` topics this page follows (``approvals``, ``audit``).
    """
    nav = ""
    user = ""
    if who is not None:
        links = []
        for key, href, text in _NAV:
            current_attr = ' aria-current="page"' if key == current else ""
            links.append(f'<a href="{href}"{current_attr}>{text}</a>')
        nav = f'<nav aria-label="Main">{"".join(links)}</nav>'
        user = (
            f'<div class="who"><span><strong>{esc(who[0])}</strong> · {esc(who[1])}</span>'
            f'<form method="post" action="/logout"><input type="hidden" name="csrf" value="{attr(csrf)}">'
            '<button type="submit" class="link">Sign out</button></form></div>'
        )
    messages = "".join(
        f'<p class="flash flash-{attr(kind)}" role="{"alert" if kind == "error" else "status"}">'
        f"{esc(text)}</p>"
        for kind, text in flash or []
    )
    live_attr = f' data-live="{attr(live)}"' if live else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · ongrid console</title>"
        '<link rel="stylesheet" href="/static/console.css">'
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'
        '<script src="/static/console.js" defer></script></head>'
        f'<body data-page="{attr(current)}"{live_attr}>'
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header class="top"><a class="brand" href="/">ongrid console</a>{nav}{user}</header>'
        f'<main id="main" tabindex="-1">{messages}{body}</main></body></html>\n'
    )


def options(name: str, choices: Sequence[tuple[str, str]], query: Mapping[str, str]) -> str:
    """The ``<option>`` elements of the filter ``name``, the one ``query`` chose selected."""
    chosen = query.get(name, "")
    return "".join(
        f'<option value="{attr(value)}"{" selected" if value == chosen else ""}>{esc(text)}</option>'
        for value, text in choices
    )


def short(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
