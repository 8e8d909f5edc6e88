"""A tool's JSON Schema as an HTML form, and the submitted form back into arguments.

Each top-level property becomes one field, named ``arg.<property>``: a text box for a
string (``minLength``, ``maxLength`` and ``pattern`` checked in the browser), a number
box for an integer or number (``minimum``/``maximum``), a select for an ``enum``, a
checkbox for a boolean, and a JSON text area for anything else (objects, arrays,
``anyOf``...), which the page's script parses before it submits. The browser's checks
are a convenience: the server converts the fields with :func:`form_arguments` and the
host checks the result against the full schema, as for every other caller.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from .html import attr, esc

__all__ = ["PREFIX", "FieldError", "field_of", "form_arguments", "render_fields"]

PREFIX = "arg."


class FieldError(Exception):
    """Form values that cannot be arguments: ``errors`` maps each field to what is wrong."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))


def field_of(path: str) -> str:
    """The top-level property a JSON path (``$.count``, ``$.tags[0]``) points into; ``""`` for the root."""
    return re.split(r"[./\[]", path.lstrip("$./"), maxsplit=1)[0]


def _kind(spec: Mapping[str, Any]) -> str:
    if "enum" in spec and spec["enum"] and all(isinstance(v, str | int | float) for v in spec["enum"]):
        return "enum"
    kind = spec.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind in ("string", "integer", "number", "boolean"):
        return str(kind)
    return "json"


def _properties(schema: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
    props = schema.get("properties")
    required = schema.get("required")
    return (
        {k: v for k, v in props.items() if isinstance(v, dict)} if isinstance(props, dict) else {},
        set(required) if isinstance(required, list) else set(),
    )


def render_fields(
    schema: Mapping[str, Any],
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> str:
    """The form fields for ``schema``; ``values`` refill them, ``errors`` show next to each."""
    values = values or {}
    errors = errors or {}
    props, required = _properties(schema)
    if not props:
        return '<p class="muted">This tool takes no arguments.</p>'
    out = []
    for name, spec in props.items():
        out.append(_field(name, spec, name in required, values.get(name), errors.get(name)))
    extra = errors.get("")
    if extra:
        out.append(f'<p class="field-error" role="alert">{esc(extra)}</p>')
    return "\n".join(out)


def _field(name: str, spec: Mapping[str, Any], required: bool, value: str | None, error: str | None) -> str:
    kind = _kind(spec)
    ident = "f-" + "".join(c if c.isalnum() else "-" for c in name)
    default = spec.get("default")
    if value is None and default is not None:
        value = default if isinstance(default, str) else json.dumps(default)
    common = _common(ident, PREFIX + name, spec, kind, required, error)
    label_text = esc(str(spec.get("title") or name))
    marker = ' <span class="req" aria-hidden="true">*</span>' if required and kind != "boolean" else ""
    type_text = esc(_type_text(spec, kind))
    label = f'<label for="{ident}">{label_text}{marker} <span class="type">{type_text}</span></label>'
    control = _control(kind, spec, common, required, value)
    if kind == "boolean":  # the box sits inside its label
        label = (
            f'<label for="{ident}" class="check">{control} {label_text} '
            '<span class="type">boolean</span></label>'
        )
        control = ""
    parts = [f'<div class="field{" has-error" if error else ""}">', label, control]
    if spec.get("description"):
        parts.append(f'<p class="help" id="{ident}-help">{esc(str(spec["description"]))}</p>')
    if error:
        parts.append(f'<p class="field-error" id="{ident}-error" role="alert">{esc(error)}</p>')
    parts.append("</div>")
    return "".join(p for p in parts if p)


def _common(
    ident: str, field: str, spec: Mapping[str, Any], kind: str, required: bool, error: str | None
) -> list[str]:
    """The attributes every control has: id, name, its description and error, required."""
    common = [f'id="{ident}"', f'name="{attr(field)}"']
    described = []
    if spec.get("description"):
        described.append(f"{ident}-help")
    if error:
        described.append(f"{ident}-error")
        common.append('aria-invalid="true"')
    if described:
        common.append(f'aria-describedby="{" ".join(described)}"')
    if required and kind != "boolean":
        common.append("required")
    return common


def _control(kind: str, spec: Mapping[str, Any], common: list[str], required: bool, value: str | None) -> str:
    """The input of one field: a select, a checkbox, a number or text box, or a JSON text area."""
    if kind == "enum":
        options = [] if required else ['<option value="">(not set)</option>']
        for option in spec["enum"]:
            text = str(option) if isinstance(option, str) else json.dumps(option)
            chosen = " selected" if value is not None and text == value else ""
            options.append(f'<option value="{attr(text)}"{chosen}>{esc(text)}</option>')
        return f"<select {' '.join(common)}>{''.join(options)}</select>"
    if kind == "boolean":
        checked = " checked" if value in ("true", "on", True) else ""
        return f'<input type="checkbox" value="true" {" ".join(common)}{checked}>'
    shown = f' value="{attr(value)}"' if value is not None else ""
    if kind in ("integer", "number"):
        limits = [f'step="{"1" if kind == "integer" else "any"}"', 'inputmode="decimal"']
        for key, html_key in (("minimum", "min"), ("maximum", "max")):
            if isinstance(spec.get(key), int | float) and not isinstance(spec.get(key), bool):
                limits.append(f'{html_key}="{attr(str(spec[key]))}"')
        return f'<input type="number" {" ".join(common + limits)}{shown}>'
    if kind == "string":
        limits = []
        for key, html_key in (("minLength", "minlength"), ("maxLength", "maxlength")):
            if isinstance(spec.get(key), int) and not isinstance(spec.get(key), bool):
                limits.append(f'{html_key}="{spec[key]}"')
        if isinstance(spec.get("pattern"), str):
            limits.append(f'data-pattern="{attr(spec["pattern"])}"')
        return f'<input type="text" autocomplete="off" {" ".join(common + limits)}{shown}>'
    text = esc(value) if value is not None else ""
    return f'<textarea rows="3" data-json="1" spellcheck="false" {" ".join(common)}>{text}</textarea>'


def _type_text(spec: Mapping[str, Any], kind: str) -> str:
    if kind == "json":
        kind = str(spec.get("type") or "JSON")
        return f"{kind}, as JSON"
    if kind == "enum":
        return "one of"
    bits = [kind]
    if "minimum" in spec or "maximum" in spec:
        bits.append(f"{spec.get('minimum', '')}..{spec.get('maximum', '')}")
    return " ".join(bits)


def form_arguments(schema: Mapping[str, Any], form: Mapping[str, str]) -> dict[str, Any]:
    """The arguments the submitted ``form`` stands for; :class:`FieldError` for values of the wrong shape.

    An empty optional field is left out (the schema's default applies); everything the
    schema says beyond the shape of each value is checked by the host afterwards.
    """
    props, required = _properties(schema)
    args: dict[str, Any] = {}
    errors: dict[str, str] = {}
    unknown = sorted(k[len(PREFIX) :] for k in form if k.startswith(PREFIX) and k[len(PREFIX) :] not in props)
    if unknown:
        errors[""] = f"unknown field(s): {', '.join(unknown)}"
    for name, spec in props.items():
        kind = _kind(spec)
        raw = form.get(PREFIX + name)
        if kind == "boolean":
            if raw is not None:
                args[name] = raw in ("true", "on")
            elif name in required:
                args[name] = False
            continue
        if raw is None or raw == "":
            continue
        try:
            args[name] = _convert(kind, spec, raw)
        except ValueError as exc:
            errors[name] = str(exc)
    if errors:
        raise FieldError(errors)
    return args


def _convert(kind: str, spec: Mapping[str, Any], raw: str) -> Any:
    if kind == "string":
        return raw
    if kind == "integer":
        try:
            return int(raw.strip())
        except ValueError:
            raise ValueError(f"{raw!r} is not a whole number") from None
    if kind == "number":
        try:
            number = float(raw.strip())
        except ValueError:
            raise ValueError(f"{raw!r} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"{raw!r} is not a finite number")
        return int(number) if number.is_integer() and "." not in raw and "e" not in raw.lower() else number
    if kind == "enum":
        for option in spec["enum"]:
            if (option if isinstance(option, str) else json.dumps(option)) == raw:
                return option
        raise ValueError(f"{raw!r} is not one of the choices")
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not valid JSON: {exc}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
