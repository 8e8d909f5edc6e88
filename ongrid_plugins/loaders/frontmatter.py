"""Markdown files with YAML front matter: split them, parse the YAML safely.

Splitting tolerates what real clients tolerate: a UTF-8 byte-order mark, CRLF or CR
line endings (normalised to LF), blank lines before the opening ``---`` and trailing
blanks on either fence. The front matter ends at the *first* ``---`` line after the
opening one, because bodies often contain ``---`` rules; an opening fence that never
closes is an error.

Parsing uses PyYAML's safe loader only (the libyaml one when available), imported on
the first call so that ``import ongrid_plugins`` and skill.json-only hosts never pay
for it. On top of ``safe_load``:

* the result must be JSON-like: timestamps stay strings, and ``!!set``, ``!!binary``,
  ``!!omap``, ``!!pairs``, ``!!timestamp`` and Python tags (``!!python/...``) are
  refused with a message naming the tag — nothing is ever constructed from a tag;
* aliases are never expanded past a budget: the size the document *would* have is
  computed on the composed node graph (shared nodes counted once per use, without
  building anything), and a document whose aliases add more than
  :data:`MAX_ALIAS_NODES` nodes, or refer to themselves, is refused;
* one retry for the most common authoring slip, a top-level plain value holding
  ``": "`` (``description: Use it via the tool: send...``): such values are quoted and
  the text parsed again (:func:`parse_yaml` reports which keys it quoted).
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from ..core.echo import number_too_long

__all__ = [
    "MAX_ALIAS_NODES",
    "Document",
    "FrontMatterError",
    "first_paragraph",
    "load_yaml",
    "parse_yaml",
    "quote_colon_values",
    "split",
]

#: How many nodes alias expansion may add to a document before it is refused.
MAX_ALIAS_NODES = 10_000

_FENCE = re.compile(r"^---[ \t]*$", re.MULTILINE)
_TOP_LEVEL_PLAIN = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)([ \t]*:[ \t]+)(.*?)[ \t]*")
_NOT_PLAIN_START = frozenset("'\"[{|>&*!%@`#")
_REFUSED_TAGS = ("set", "binary", "omap", "pairs", "timestamp")
_TAG_IN_MESSAGE = re.compile(r"tag '([^']*)'")
_YAML_PREFIX = "tag:yaml.org,2002:"


class FrontMatterError(ValueError):
    """The front matter cannot be read; the message says why and where (file line numbers)."""


@attrs.frozen
class Document:
    """A Markdown file split into its front matter and body."""

    front: str | None
    """The YAML text between the fences (LF line endings), or None if there is no front matter."""
    body: str
    """Everything after the closing fence line (the whole text without front matter)."""
    front_line: int = 1
    """The file line number of the first line of ``front``."""
    bom: bool = False
    """The file started with a UTF-8 byte-order mark (other clients then see no front matter)."""
    blank_lines_before: int = 0
    """Blank lines before the opening fence (the Agent Skills spec wants ``---`` first)."""


def split(text: str) -> Document:
    """Split decoded file text into front matter and body.

    Raises :class:`FrontMatterError` for an opening fence that never closes.
    """
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    pos, blank = 0, 0
    while True:
        end = text.find("\n", pos)
        line = text[pos:] if end == -1 else text[pos:end]
        if line.strip() or end == -1:
            break
        pos, blank = end + 1, blank + 1
    if line.rstrip(" \t") != "---":
        return Document(None, text, bom=bom, blank_lines_before=blank)
    opening = blank + 1
    start = len(text) if end == -1 else end + 1
    close = _FENCE.search(text, start)
    if close is None:
        message = f"the front matter opened on line {opening} is never closed (no '---' line after it)"
        raise FrontMatterError(message)
    after = text.find("\n", close.end())
    body = "" if after == -1 else text[after + 1 :]
    return Document(text[start : close.start()], body, opening + 1, bom, blank)


def parse_yaml(text: str, first_line: int = 1) -> tuple[Any, list[str]]:
    """Parse front-matter YAML; return ``(data, quoted_keys)``.

    ``quoted_keys`` names the top-level keys whose values had to be quoted for the
    text to parse (empty when it parsed as written). Raises :class:`FrontMatterError`
    with file line numbers (``first_line`` is the file line of the text's first line).
    """
    try:
        return _parse(text, first_line), []
    except FrontMatterError:
        raise
    except Exception as exc:
        first_error = exc
    retried = quote_colon_values(text)
    if retried is not None:
        fixed, keys = retried
        try:
            return _parse(fixed, first_line), keys
        except Exception:  # report the author's text, not our rewrite
            pass
    raise FrontMatterError(_describe(first_error, text, first_line)) from None


def load_yaml(text: str, first_line: int = 1) -> Any:
    """Parse any YAML the project reads (persona files...) under the same guards as
    SKILL.md front matter: no alias bombs or recursive aliases, no tags beyond plain
    data, and :class:`FrontMatterError` with file line numbers for everything else."""
    try:
        return _parse(text, first_line)
    except FrontMatterError:
        raise
    except Exception as exc:
        raise FrontMatterError(_describe(exc, text, first_line)) from None


def quote_colon_values(text: str) -> tuple[str, list[str]] | None:
    """Quote top-level plain values that contain ``": "``; None when there is none.

    A plain value may continue on indented lines (YAML folds them with spaces); those
    are folded into the quoted value. A ``" #"`` ends the value, as in YAML.
    """
    lines = text.split("\n")
    out: list[str] = []
    keys: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        match = _TOP_LEVEL_PLAIN.fullmatch(line)
        value = match.group(3) if match else ""
        if not match or not value or value[0] in _NOT_PLAIN_START:
            out.append(line)
            continue
        parts = [value.split(" #", 1)[0].rstrip()]
        while index < len(lines) and lines[index][:1] == " " and lines[index].strip():
            parts.append(lines[index].strip().split(" #", 1)[0].rstrip())
            index += 1
        folded = " ".join(parts)
        if ": " not in folded and not folded.endswith(":"):
            out.extend([line, *lines[index - len(parts) + 1 : index]])
            continue
        keys.append(match.group(1))
        out.append(match.group(1) + match.group(2) + json.dumps(folded, ensure_ascii=False))
    return ("\n".join(out), keys) if keys else None


def first_paragraph(body: str, limit: int = 1024) -> str:
    """The first paragraph of Markdown prose: headings, comments and code fences skipped.

    Lines of the paragraph are joined with spaces; the result is cut to ``limit``
    characters (ending in ``…``). A last sentence that only leads into what follows
    (``Use it when:`` before a list) is dropped when a whole sentence comes before it:
    alone, the description would end on a colon that introduces nothing.
    """
    lines = body.split("\n")
    index = 0
    while index < len(lines):
        stripped = lines[index].strip()
        if not stripped or stripped.startswith("#") or set(stripped) <= set("=-"):
            index += 1
        elif stripped.startswith("<!--"):
            index = _skip_until(lines, index, "-->")
        elif stripped.startswith(("```", "~~~")):
            index = _skip_until(lines, index, stripped[:3], start_offset=1)
        elif index + 1 < len(lines) and _is_underline(lines[index + 1]):
            index += 2  # a setext heading
        else:
            break
    paragraph: list[str] = []
    while index < len(lines) and lines[index].strip():
        paragraph.append(lines[index].strip())
        index += 1
    text = _without_lead_in(" ".join(paragraph))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _without_lead_in(text: str) -> str:
    """``text`` without a last sentence ending in a colon, if an earlier sentence ends it."""
    if not text.endswith(":"):
        return text
    end = max(text.rfind(mark, 0, len(text) - 1) for mark in (". ", "! ", "? "))
    return text[: end + 1] if end > 0 else text


def _is_underline(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= 2 and (set(stripped) == {"="} or set(stripped) == {"-"})


def _skip_until(lines: list[str], index: int, marker: str, start_offset: int = 0) -> int:
    """The index after the line (from ``index``) that contains ``marker``."""
    first = lines[index].strip()
    if not start_offset and marker in first[4:]:
        return index + 1
    for later in range(index + 1, len(lines)):
        if marker in lines[later]:
            return later + 1
    return len(lines)


# -------------------------------------------------------------------------
# The safe loader
# -------------------------------------------------------------------------

_LOADER: Any = None


def _loader() -> Any:
    """The loader class, built on first use (this is where PyYAML is imported)."""
    global _LOADER
    if _LOADER is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        loader: Any = type("FrontMatterLoader", (base,), {})
        loader.yaml_implicit_resolvers = {
            first: [(tag, regexp) for tag, regexp in resolvers if tag != _YAML_PREFIX + "timestamp"]
            for first, resolvers in base.yaml_implicit_resolvers.items()
        }
        for name in _REFUSED_TAGS:
            loader.add_constructor(_YAML_PREFIX + name, _refuse_tag)
        _LOADER = loader
    return _LOADER


def _refuse_tag(_loader: Any, node: Any) -> Any:
    from yaml.constructor import ConstructorError

    tag = node.tag.replace(_YAML_PREFIX, "!!")
    problem = f"the YAML tag {tag} is not allowed (front matter must be plain JSON-like data)"
    raise ConstructorError(None, None, problem, node.start_mark)


def _parse(text: str, first_line: int) -> Any:
    loader = _loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text:  # no '*' at all: no alias can exist
            _check_aliases(node, first_line)
        _check_duplicate_keys(node, first_line, loader)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_aliases(root: Any, first_line: int) -> None:
    """Refuse recursive aliases and alias expansion past the budget, without expanding."""
    sizes: dict[int, int] = {}
    path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            continue
        if key in sizes:
            continue
        if key in path:
            line = first_line + node.start_mark.line
            message = f"invalid YAML front matter: an alias refers to the node that contains it (line {line})"
            raise FrontMatterError(message)
        path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    added = sizes[id(root)] - len(sizes)
    if added > MAX_ALIAS_NODES:
        message = (
            f"YAML aliases would expand the front matter by {added} nodes, more than the "
            f"{MAX_ALIAS_NODES} allowed (an alias bomb?); it was refused without being expanded"
        )
        raise FrontMatterError(message)


def _check_duplicate_keys(root: Any, first_line: int, loader: Any) -> None:
    """Refuse a mapping (at any level) that gives a key twice.

    PyYAML keeps the last value silently; another reader may keep the first, so
    the same file would be two different skills (skill.json refuses the same).
    Keys spelled differently count as one when they read as one: ``yes`` and
    ``true`` (one Python key), ``1`` and ``'1'`` (one JSON object key).
    """
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if node.id == "mapping":
            keys: dict[object, tuple[int, Any]] = {}
            for key, _value in node.value:
                if key.id != "scalar" or key.tag == _YAML_PREFIX + "merge":
                    continue
                line = first_line + key.start_mark.line
                names = _key_names(loader, key)
                first = next((keys[name] for name in names if name in keys), None)
                if first is not None:
                    raise FrontMatterError(_duplicate_key(key, line, *first))
                keys.update(dict.fromkeys(names, (line, key)))
        stack.extend(_children(node))


def _key_names(loader: Any, key: Any) -> tuple[object, ...]:
    """Every identity a scalar key has once read: as written, as a Python dict key, as JSON text."""
    value = loader.construct_object(key)  # a scalar: its tag's constructor (refused tags raise)
    try:
        hash(value)
    except TypeError:
        return (("written", key.tag, key.value),)
    as_json = json.dumps(value) if not isinstance(value, str) else value
    return (("written", key.tag, key.value), ("value", value), ("json", as_json), ("text", str(value)))


def _duplicate_key(key: Any, line: int, first_line: int, first: Any) -> str:
    this, other = _spelled(key), _spelled(first)
    same = (
        "" if (key.tag, key.value) == (first.tag, first.value) else f' as "{other}", the same key once read'
    )
    shown = key.value if not same else this
    return (
        f'invalid YAML front matter: duplicate key "{shown}" (line {line}, first at line {first_line}{same}):'
        " two parsers could read two different manifests; keep one"
    )


def _spelled(key: Any) -> str:
    """A scalar key as written: quoted if it was."""
    quote = key.style if key.style in ("'", '"') else ""
    return f"{quote}{key.value}{quote}"


def _tab_at(text: str, line: int) -> bool:
    lines = text.split("\n")
    return 0 <= line < len(lines) and lines[line][:1] == "\t"


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, str):
        return []
    if value and isinstance(value[0], tuple):
        return [part for pair in value for part in pair]
    return list(value)


def _describe(exc: Exception, text: str, first_line: int) -> str:
    """One line from a PyYAML error: what, and where in the file."""
    problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    tag = _TAG_IN_MESSAGE.search(problem)
    if tag and "could not determine a constructor" in problem:
        name = tag.group(1).replace(_YAML_PREFIX, "!!")
        if "python/" in name:
            problem = f"the YAML tag {name} would build a Python object; such tags are refused, never run"
        else:
            problem = f"unknown YAML tag {name} (front matter must be plain JSON-like data)"
    elif isinstance(exc, RecursionError):
        problem = "the front matter is nested too deeply"
    elif isinstance(exc, ValueError) and "int_max_str_digits" in problem:
        # Python's advice (raise the limit) is none for a file: where, and how long
        return f"invalid YAML front matter: {number_too_long(text, first_line) or problem}"
    if mark is not None and _tab_at(text, mark.line):
        problem += " (YAML does not allow tabs for indentation: indent with spaces)"
    where = f" (line {first_line + mark.line}, column {mark.column + 1})" if mark is not None else ""
    return f"invalid YAML front matter: {problem}{where}"
