"""The API reference as one HTML page, rendered here from the OpenAPI document (``GET /docs``).

No JavaScript, no stylesheet or font from a CDN: the page works on a machine
without internet access and sends nobody's browser elsewhere. Every path and
method of :func:`~ongrid_plugins.server.openapi.document` is listed with its
summary, parameters, request body and responses; schemas are shown as JSON,
``$ref``\\ s as links to the schema's section of the same page.

Imports only the standard library.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["render"]

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2.2rem}
h3{margin-bottom:.3rem}.m{display:inline-block;min-width:4.2rem;font-weight:700}
pre{background:#f5f5f5;padding:.6rem;overflow-x:auto;font-size:13px}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
code{background:#f5f5f5;padding:0 .2rem}
"""


def render(document: dict[str, Any]) -> str:
    """The reference page for ``document`` (an OpenAPI 3.1 document as a dict)."""
    info = document.get("info", {})
    title = html.escape(str(info.get("title", "API")))
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{title} <small>{html.escape(str(info.get('version', '')))}</small></h1>",
        f"<p>{html.escape(str(info.get('description', '')))}</p>",
        "<p>Every route but <code>/healthz</code>, <code>/openapi.json</code> and this page needs "
        "<code>Authorization: Bearer &lt;token&gt;</code>. The machine-readable document is "
        '<a href="openapi.json">openapi.json</a>.</p>',
        "<h2>Routes</h2><ul>",
    ]
    routes = [
        (path, method, op) for path, item in document.get("paths", {}).items() for method, op in item.items()
    ]
    for path, method, op in routes:
        anchor = _anchor(method, path)
        summary = html.escape(str(op.get("summary", "")))
        parts.append(
            f'<li><a href="#{anchor}"><span class="m">{method.upper()}</span>{html.escape(path)}</a> '
            f"— {summary}</li>"
        )
    parts.append("</ul>")
    for path, method, op in routes:
        parts.append(_operation(path, method, op))
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        parts.append("<h2>Schemas</h2>")
        for name, schema in schemas.items():
            parts.append(f'<h3 id="schema-{html.escape(name)}">{html.escape(name)}</h3>{_json(schema)}')
    parts.append("</body></html>")
    return "\n".join(parts)


def _anchor(method: str, path: str) -> str:
    return method + "-" + "".join(c if c.isalnum() else "-" for c in path).strip("-")


def _operation(path: str, method: str, op: dict[str, Any]) -> str:
    out = [
        f'<h2 id="{_anchor(method, path)}"><span class="m">{method.upper()}</span>{html.escape(path)}</h2>',
        f"<p>{html.escape(str(op.get('summary', '')))}</p>",
    ]
    if op.get("security") == []:
        out.append("<p>No token needed.</p>")
    params = op.get("parameters", [])
    if params:
        out.append("<table><tr><th>parameter</th><th>in</th><th>schema</th><th>meaning</th></tr>")
        for p in params:
            out.append(
                f"<tr><td><code>{html.escape(str(p.get('name')))}</code></td><td>{html.escape(str(p.get('in')))}"
                f"</td><td>{_inline(p.get('schema', {}))}</td>"
                f"<td>{html.escape(str(p.get('description', '')))}</td></tr>"
            )
        out.append("</table>")
    body = op.get("requestBody")
    if body:
        schema = body.get("content", {}).get("application/json", {}).get("schema", {})
        out.append(f"<h3>Request body (JSON)</h3>{_inline(schema)}")
    out.append("<h3>Responses</h3><table><tr><th>status</th><th>meaning</th><th>body</th></tr>")
    for status, response in op.get("responses", {}).items():
        content: dict[str, Any] = response.get("content", {})
        kind: str = next(iter(content), "")
        media: dict[str, Any] = content.get(kind, {})
        shown = f"{html.escape(kind)} {_inline(media.get('schema', {}))}" if kind else ""
        out.append(
            f"<tr><td>{html.escape(str(status))}</td><td>{html.escape(str(response.get('description', '')))}"
            f"</td><td>{shown}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _inline(schema: Any) -> str:
    if isinstance(schema, dict) and set(schema) == {"$ref"}:
        name = str(schema["$ref"]).rpartition("/")[2]
        return f'<a href="#schema-{html.escape(name)}">{html.escape(name)}</a>'
    return f"<code>{html.escape(json.dumps(schema, ensure_ascii=False))}</code>"


def _json(schema: Any) -> str:
    return f"<pre>{html.escape(json.dumps(schema, indent=2, ensure_ascii=False))}</pre>"
