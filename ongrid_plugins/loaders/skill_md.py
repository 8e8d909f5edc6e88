"""Built-in plugin ``skill_md``: ``SKILL.md`` files become skills.

Reads the Agent Skills format and its dialects (Claude Code, openclaw, the original
ongrid manager), leniently like the clients that use them, recording every
forgiven slip as a warning on the skill (``ongrid-skills validate --strict`` fails
on them). See ``docs/skill-md.md`` for every field.

Only the front matter is kept: the body (the instructions) is read again on demand
by :func:`ongrid_plugins.catalog.instructions.read_instructions` (progressive disclosure).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import ManifestBuildError, ManifestParseError
from ..hookspecs import hookimpl
from ..models import Activation, Skill, SkillRoot
from . import containers
from ._fields import Fields, canon, show, type_name
from ._sandbox import read_sandbox
from .frontmatter import Document, FrontMatterError, first_paragraph, parse_yaml, split
from .skill_json_parse import read_bounded as _read_bounded
from .skill_md_meta import Metadata, read_metadata
from .skill_md_tools import build_tools, normalise_name

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["FORMAT", "MANIFEST_NAMES", "build_skill", "load_skill_md", "parse_document", "read_document"]

MANIFEST_NAMES = ("SKILL.md", "skill.md")
FORMAT = "SKILL.md"
MAX_BYTES = 1024 * 1024
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_BODY_LINES = 500
#: The Agent Skills name charset, with ``_`` allowed as in the ongrid dialect (``query_promql``).
SPEC_NAME = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")

#: Every top-level key we know, canonical spelling -> preferred spelling.
TOP_LEVEL = {
    name.replace("-", "_"): name
    for name in (
        # Agent Skills
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowed-tools",
        # ongrid
        "version",
        "when_to_use",
        "activation",
        "config_section",
        "tools",
        "category",
        # Claude Code
        "argument-hint",
        "disable-model-invocation",
        "user-invocable",
        "model",
        "disallowed-tools",
        "effort",
        "context",
        "agent",
        "hooks",
        "paths",
        "shell",
        "display-name",
        "default-enabled",
        "fallback",
        "arguments",
        "background",
        # openclaw / ClawHub
        "homepage",
        "command-dispatch",
        "command-tool",
        "command-arg-mode",
    )
}
#: Keys with a field of their own on :class:`Skill`; every other key is kept in ``extra``.
MODELLED = frozenset({"name", "description", "when_to_use", "version", "activation", "tools", "category"})
_STRINGS = (
    "argument_hint",
    "model",
    "effort",
    "context",
    "agent",
    "shell",
    "homepage",
    "command_dispatch",
    "command_tool",
    "command_arg_mode",
    "config_section",
)
_FLAGS = ("disable_model_invocation", "user_invocable", "default_enabled", "background")
_LISTS = ("allowed_tools", "disallowed_tools", "paths")


@hookimpl
def ongrid_manifest_names() -> list[str]:
    """This loader claims ``SKILL.md`` and, like the Agent Skills reference, ``skill.md``."""
    return list(MANIFEST_NAMES)


@hookimpl
def ongrid_load_manifest(path: str, root: SkillRoot, settings: Settings, manifest_name: str) -> Skill | None:
    """Read and build a SKILL.md (found under that name; ``path`` may be a symlink's target,
    named otherwise); leave every other file to other loaders."""
    if manifest_name not in MANIFEST_NAMES:
        return None
    try:
        return load_skill_md(path, root, settings)
    except RecursionError:  # a value nested deeper than a check follows: this file's error, not a crash
        message = "the front matter is nested too deeply to read; flatten it"
        raise ManifestParseError(path, message) from None


def load_skill_md(path: str, root: SkillRoot, settings: Settings | None = None) -> Skill:
    """Read, split, parse and build one SKILL.md.

    Raises :class:`ManifestParseError` (unreadable, unclosed fence, bad YAML, refused
    YAML) or :class:`ManifestBuildError` (a broken field rule).
    """
    document = read_document(path)
    fields = Fields(path)
    data = _front_matter(fields, path, document)
    return build_skill(fields, data, document, path, root, settings)


def read_document(path: str) -> Document:
    """The file split into front matter and body; :class:`ManifestParseError` if it cannot be."""
    return parse_document(_read_bounded(path, MAX_BYTES), path)


def parse_document(raw: bytes, path: str) -> Document:
    """The bytes of the SKILL.md at ``path`` split into front matter and body."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"invalid UTF-8 at byte {exc.start}: {exc.reason}"
        raise ManifestParseError(path, message) from None
    try:
        return split(text)
    except FrontMatterError as exc:
        raise ManifestParseError(path, str(exc)) from None


def _front_matter(fields: Fields, path: str, document: Document) -> dict[Any, Any]:
    if document.bom:
        fields.warn(
            "",
            "utf8_bom",
            "the file starts with a UTF-8 byte-order mark",
            "other clients miss the front matter then; remove it",
        )
    if document.blank_lines_before:
        message = f"{document.blank_lines_before} blank line(s) before the opening ---"
        fields.warn("", "blank_before_fence", message, "the Agent Skills spec wants --- on the first line")
    if document.front is None:
        message = "no front matter: loaded as a prompt skill named after its folder, described by its first "
        message += "paragraph"
        fields.warn("", "no_front_matter", message, "start the file with ---, name: and description:")
        return {}
    try:
        data, quoted = parse_yaml(document.front, document.front_line)
    except FrontMatterError as exc:
        raise ManifestParseError(path, str(exc)) from None
    if quoted:
        keys = ", ".join(quoted)
        message = (
            f"the front matter is not valid YAML as written; it was read with the value of {keys} quoted"
        )
        fields.warn("/" + quoted[0], "yaml_retried_quoted", message, 'quote values that contain ": "')
    if data is None:
        return {}
    if not isinstance(data, dict):
        message = f"the front matter must be a mapping of keys to values, not {type_name(data)}"
        raise ManifestParseError(path, message)
    return data


def build_skill(
    fields: Fields,
    data: Mapping[Any, Any],
    document: Document,
    path: str,
    root: SkillRoot,
    settings: Settings | None = None,
) -> Skill:
    """Check the front matter's fields and build the skill (raises :class:`ManifestBuildError`)."""
    folder = os.path.dirname(path)
    bare = document.front is None
    known = fields.known(data, TOP_LEVEL, "")
    declared, name, display = _name(fields, known, folder, quiet=bare)
    description = _description(fields, known, document, quiet=bare)
    meta = read_metadata(fields, known["metadata"]) if known.get("metadata") is not None else Metadata()
    activation = _activation(fields, known.get("activation"), meta.activation)
    _check_extras(fields, known)
    text = _optional_text(fields, known)
    display = text.get("display_name") or display
    category = meta.category or text.get("category") or "external"
    pack = containers.find_pack(folder, root)
    owner = _owner(fields, pack, folder, root)
    sandbox = None
    if meta.has_sandbox:
        at, label = "/metadata/ongrid/sandbox", "metadata.ongrid.sandbox"
        sandbox = read_sandbox(fields, meta.sandbox, at, label, settings, json=False, root=root.real)
    raw_tools = known.get("tools")
    tools = build_tools(fields, raw_tools, name, description, path, owner, settings, category, sandbox)
    _lint(fields, declared, folder, description, text, document)
    errors = fields.errors
    if errors:
        raise ManifestBuildError(path, name, "; ".join(p.said for p in errors), fields.problems)
    invocable = not _flag(fields, known, "disable_model_invocation")
    return Skill(
        name=name,
        description=description,
        format=FORMAT,
        path=path,
        root=owner,
        tools=tools,
        category=category,
        display_name=display,
        when_to_use=text.get("when_to_use", ""),
        warnings=[p for p in fields.problems if p.level == "warning"],
        extra={str(k): v for k, v in data.items() if canon(k) not in MODELLED},
        version=text.get("version", ""),
        activation=activation,
        requires=meta.requires,
        model_invocable=invocable,
        notices=containers.take_notices(pack, root) if pack is not None else (),
    )


def _name(fields: Fields, known: Mapping[str, Any], folder: str, *, quiet: bool) -> tuple[str, str, str]:
    """``(declared, key, display name)``: the name as written, its key, its display form.

    A name the Agent Skills specification allows (``mcp-builder``) is its own key; any
    other becomes a lower_snake key, the name as written kept for display.
    """
    folder_name = os.path.basename(folder)
    raw = known.get("name")
    if isinstance(raw, list | dict):
        fields.error("/name", "wrong_type", f'"name" must be a string (got {type_name(raw)})')
        return "", "", ""
    declared = (fields.text(raw, "/name", "name") or "").strip() if raw is not None else ""
    if not declared:
        if not quiet:
            fields.warn("/name", "name_missing", f'no "name"; the folder name "{folder_name}" is used')
        declared = folder_name
    if SPEC_NAME.fullmatch(declared) and len(declared) <= MAX_NAME_LENGTH:
        return declared, declared, ""
    name = normalise_name(declared)
    if not name:
        name = normalise_name(folder_name) or "skill_" + hashlib.sha1(declared.encode()).hexdigest()[:8]
        message = f'name {show(declared)} has no ASCII letter or digit; it is registered as "{name}"'
        fields.warn("/name", "name_normalized", message, "skill keys are lower_snake")
    elif name != declared:
        message = f'name "{declared}" was normalised to "{name}" (skill keys are lower_snake)'
        fields.warn("/name", "name_normalized", message)
    return declared, name, declared if declared != name else ""


def _description(fields: Fields, known: Mapping[str, Any], document: Document, *, quiet: bool) -> str:
    raw = known.get("description")
    if isinstance(raw, list | dict):
        fields.error("/description", "wrong_type", f'"description" must be a string (got {type_name(raw)})')
        return ""
    text = fields.text(raw, "/description", "description") if raw is not None else None
    if text and text.strip():
        return text.strip()
    paragraph = first_paragraph(document.body, MAX_DESCRIPTION)
    if paragraph:
        if not quiet:
            message = 'no "description"; the first paragraph of the body is used'
            fields.warn("/description", "description_from_body", message)
        return paragraph
    message = '"description" is missing and the body has no paragraph to use instead'
    fields.error(
        "/description", "missing_field", message, "add description: saying what it does and when to use it"
    )
    return ""


def _activation(fields: Fields, top: object, ongrid: object) -> Activation:
    chosen, where = top, "/activation"
    if ongrid is not None:
        if top is not None and top != ongrid:
            message = "activation and metadata.ongrid.activation differ; metadata.ongrid.activation wins"
            fields.warn("/metadata/ongrid/activation", "activation_conflict", message)
        chosen, where = ongrid, "/metadata/ongrid/activation"
    if chosen is None:
        return Activation()
    data = fields.mapping(chosen, where, "activation")
    if data is None:
        return Activation()
    known = fields.known(data, {"mode": "mode", "keywords": "keywords"}, where)
    mode = (fields.text(known["mode"], where + "/mode", "mode") or "") if "mode" in known else ""
    mode = mode.strip().lower() or "always"
    if mode not in ("always", "keyword"):
        message = f'activation mode "{mode}" is unknown; the skill behaves as "always"'
        fields.warn(where + "/mode", "unknown_activation_mode", message, "use always or keyword")
    keywords = _keywords(fields, known.get("keywords"), where + "/keywords")
    if mode == "keyword" and not keywords:
        fields.warn(where + "/keywords", "no_keywords", "keyword activation without keywords never matches")
    return Activation(mode, keywords)


def _keywords(fields: Fields, raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):  # phrases may hold spaces: split on commas only
        return tuple(k.strip() for k in raw.split(",") if k.strip())
    return tuple(k.strip() for k in fields.strings(raw, where, "keywords") if k.strip())


def _check_extras(fields: Fields, known: Mapping[str, Any]) -> None:
    """Type-check the interop fields we keep but do not act on; the values stay in ``extra``."""
    for key in _LISTS:
        value = known.get(key)
        if value is not None and not isinstance(value, str):
            fields.strings(value, "/" + TOP_LEVEL[key], TOP_LEVEL[key])
    if "license" in known and not isinstance(known["license"], str | dict):
        fields.warn(
            "/license",
            "wrong_type",
            f'"license" must be a string or a mapping (got {type_name(known["license"])})',
        )
    if "hooks" in known:
        message = "skill-scoped hooks are not supported; they are kept in the manifest but never run"
        fields.warn("/hooks", "unsupported", message)
    for key in _FLAGS:
        if key != "disable_model_invocation" and key in known:
            fields.flag(known[key], "/" + TOP_LEVEL[key], TOP_LEVEL[key])


def _optional_text(fields: Fields, known: Mapping[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    hint = known.get("argument_hint")
    if isinstance(hint, list):  # `argument-hint: [file]` is a YAML list; Claude Code reads the text
        joined = "[" + ", ".join(str(item) for item in hint) + "]"
        message = f'"argument-hint" is a YAML list; it was read as the text "{joined}"'
        fields.warn("/argument-hint", "coerced", message, "quote the value")
        found["argument_hint"] = joined
    for key in (*_STRINGS, "when_to_use", "version", "display_name", "category", "compatibility"):
        if key in known and known[key] is not None and key not in found:
            text = fields.text(known[key], "/" + TOP_LEVEL[key], TOP_LEVEL[key])
            if text is not None:
                found[key] = text.strip()
    return found


def _flag(fields: Fields, known: Mapping[str, Any], key: str) -> bool:
    if key not in known:
        return False
    return bool(fields.flag(known[key], "/" + TOP_LEVEL[key], TOP_LEVEL[key]))


def _owner(fields: Fields, pack: containers.Pack | None, folder: str, root: SkillRoot) -> SkillRoot:
    """The root the skill is registered under: its pack's provenance when a pack owns it."""
    if pack is None or not pack.name:
        return root
    if pack.owns(folder):
        return attrs.evolve(root, source="pack", provenance=pack.label)
    message = (
        f'inside pack "{pack.name}" ({pack.manifest}) but not one of its skills '
        "(its skills list, skills/*/ or the pack root); loaded without the pack's provenance"
    )
    fields.warn("", "outside_pack", message)
    return root


def _lint(
    fields: Fields, declared: str, folder: str, description: str, text: Mapping[str, str], document: Document
) -> None:
    """Agent Skills spec violations the loader forgives (warnings)."""
    if declared and not (SPEC_NAME.fullmatch(declared) and len(declared) <= MAX_NAME_LENGTH):
        message = (
            f"name {show(declared)} breaks the Agent Skills rule: 1-{MAX_NAME_LENGTH} lowercase letters, "
            "digits and single - or _ between them"
        )
        fields.warn("/name", "spec_name", message)
    folder_name = os.path.basename(folder)
    if declared and declared != folder_name:
        message = f'name "{declared}" differs from its folder "{folder_name}"'
        message += " (the Agent Skills spec wants them equal)"
        fields.warn("/name", "spec_name_folder", message)
    if len(description) > MAX_DESCRIPTION:
        message = f"description is {len(description)} characters; the Agent Skills limit is {MAX_DESCRIPTION}"
        fields.warn("/description", "spec_description_length", message)
    compatibility = text.get("compatibility", "")
    if len(compatibility) > MAX_COMPATIBILITY:
        message = (
            f"compatibility is {len(compatibility)} characters; the Agent Skills limit is {MAX_COMPATIBILITY}"
        )
        fields.warn("/compatibility", "spec_compatibility_length", message)
    lines = document.body.count("\n") + 1
    if lines > MAX_BODY_LINES:
        message = f"the body has {lines} lines; the Agent Skills spec recommends fewer than {MAX_BODY_LINES}"
        fields.warn("", "spec_body_length", message, "move detail into references/ files")
