"""What a skill can put on the user's terminal through ``ongrid-skills``: text, never control.

A manifest's fields and a running skill's stderr are the skill author's words. Escape
sequences in them must not set the terminal's title, clear the screen or forge log lines,
and a skill writing stderr without end must not flood the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ongrid_plugins.cli import main
from ongrid_plugins.commands.output import printable
from ongrid_plugins.testing import make_skill

DESCRIPTION = "d\u001b[31mRED\r\nFAKE LOG"
CATEGORY = "\u001b]0;title\u0007"
#: What the terminal may see of a skill's text: no ESC, BEL, CR, CSI or other control.
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if chr(c) != "\n"]


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--no-defaults", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def hostile(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_skill(root, "ctl", description=DESCRIPTION, category=CATEGORY)
    make_skill(
        root,
        "noisy",
        script="#!/bin/sh\nprintf '\\033]0;pwned\\007\\033[2J' >&2\n"
        "printf 'tab\\there \\302\\233 C1 csi\\r\\n' >&2\necho '{\"ok\": 1}'\n",
    )
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(root))
    return root


def test_printable_escapes_c0_del_and_c1_and_keeps_what_is_asked() -> None:
    assert printable("a\x1b[2J\x07\x7f\x9b\x85b") == "a\\x1b[2J\\x07\\x7f\\x9b\\x85b"
    assert printable("one\r\ntwo\tthree") == "one\\r\\ntwo\\tthree"
    assert printable("one\r\ntwo\tthree", keep="\n") == "one\\r\ntwo\\tthree"
    assert printable("café ✓ 日本") == "café ✓ 日本"
    # a right-to-left override makes "exe.txt" read as "txt.exe": escaped like the log lines do
    assert printable("name\u202etxt.exe") == "name\\u202etxt.exe"


def test_list_shows_control_characters_escaped(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_main(capsys, "list")
    assert code == 0
    [row] = [line for line in out.splitlines() if line.startswith("ctl ")]
    assert row.split() == ["ctl", "safe", "\\x1b]0;title\\x07", str(hostile), "d\\x1b[31mRED"]
    assert not any(c in out for c in CONTROLS)


def test_show_escapes_control_characters_and_keeps_a_newline_in_its_column(
    hostile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = run_main(capsys, "show", "ctl")
    assert code == 0
    lines = out.splitlines()
    at = lines.index("description:      d\\x1b[31mRED\\r")
    assert lines[at + 1] == " " * 18 + "FAKE LOG"
    assert "category:         \\x1b]0;title\\x07" in lines
    assert not any(c in out for c in CONTROLS)


def test_json_output_escapes_c1_and_del_and_stays_the_same_json(
    hostile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(hostile, "c1", description="csi \u009b2J del \u007f")
    code, out, _err = run_main(capsys, "show", "c1", "--json")
    assert code == 0
    assert "\\u009b2J del \\u007f" in out
    assert not any(c in out for c in CONTROLS)
    assert json.loads(out)["description"] == "csi \u009b2J del \u007f"


def test_run_escapes_what_the_skill_writes_on_stderr(
    hostile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "run", "noisy")
    assert (code, json.loads(out)) == (0, {"ok": 1})
    # A tab is kept: it moves the cursor along the line and nothing else.
    assert err.splitlines() == ["\\x1b]0;pwned\\x07\\x1b[2Jtab\there \\x9b C1 csi\\r"]


def test_a_failing_skill_s_last_stderr_line_is_escaped_in_the_error(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(root, "fail", script="#!/bin/sh\nprintf 'broke\\033[2J' >&2\nexit 3\n")
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(root))
    code, _out, err = run_main(capsys, "run", "fail")
    assert code == 1
    assert err.splitlines() == ["broke\\x1b[2J", "ERROR: fail: the skill exited with status 3: broke\\x1b[2J"]


def test_the_stderr_run_echoes_is_cut_after_the_limit_with_a_note(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ongrid_plugins.commands.skills import MAX_ECHO_BYTES

    line = "x" * 99
    make_skill(
        root,
        "flood",
        script=f"#!/bin/sh\n/usr/bin/yes {line} | /usr/bin/head -c {MAX_ECHO_BYTES * 2} >&2\necho '{{}}'\n",
    )
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(root))
    code, out, err = run_main(capsys, "run", "flood", "--json")
    assert code == 0
    assert json.loads(out)["stderr_tail"][-1] == line[: (MAX_ECHO_BYTES * 2) % 100]
    lines = err.splitlines()
    assert len(err) <= MAX_ECHO_BYTES + 200
    assert set(lines[:-1]) == {line}
    assert len(lines[:-1]) == MAX_ECHO_BYTES // 100
    assert lines[-1] == (
        f"(the skill wrote more than {MAX_ECHO_BYTES // (1024 * 1024)} MiB on stderr: the rest is not shown; "
        "--json shows its last lines)"
    )


HOSTILE_BODY = "# Notes\n\x1b]0;pwned\x07\x1b[2Jread\tthis\x08\n"


def _show_on(stdout: str, root: Path, *argv: str) -> bytes:
    """``ongrid-skills show ...`` in a real process whose stdout is a pty or a pipe."""
    import os
    import pty
    import subprocess
    import sys

    env = {**os.environ, "ONGRID_SKILLS_EXTERNAL_DIRS": str(root), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "show", *argv]
    if stdout == "pipe":
        return subprocess.run(command, env=env, capture_output=True, timeout=60, check=True).stdout
    parent, child = pty.openpty()
    try:
        proc = subprocess.Popen(command, env=env, stdout=child, stderr=subprocess.DEVNULL)
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(parent, 65536)
            except OSError:  # EIO: the child closed the pty
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(parent)
    return b"".join(chunks)


@pytest.mark.parametrize("argv", [("notes", "--body"), ("notes", "--file", "ref.md")])
def test_show_body_and_file_are_escaped_on_a_terminal_and_kept_in_a_pipe(
    root: Path, argv: tuple[str, ...]
) -> None:
    from ongrid_plugins.testing import make_skill_md

    make_skill_md(root, "notes", body=HOSTILE_BODY, files={"ref.md": HOSTILE_BODY})
    on_tty = _show_on("tty", root, *argv).decode()
    # the pty turns each "\n" into "\r\n" (onlcr): the escapes are ours, the line breaks its own
    assert "\\x1b]0;pwned\\x07\\x1b[2Jread\tthis\\x08\r\n" in on_tty
    assert not any(c in on_tty for c in CONTROLS if c not in "\t\r")
    piped = _show_on("pipe", root, *argv).decode()
    assert HOSTILE_BODY in piped  # redirected, the file's bytes as they are (as cat keeps them)


# ---------------------------------------------------------------- audit and approvals

#: What a skill may write on stderr, and a caller may pass as an argument: ESC, CR, BEL,
#: NUL, a C1 CSI, backspace and a right-to-left override.
NASTY = "\x1b[2K\rok\x07\x00\x9b2J\x08\u202etxt.exe"
NASTY_SHOWN = "\\x1b[2K\\rok\\x07\\x00\\x9b2J\\x08\\u202etxt.exe"
#: Writes ``NASTY`` on stderr (printf's octal escapes: the C1 CSI and U+202E in UTF-8), fails.
LIAR_SH = (
    "#!/bin/sh\nprintf '\\033[2K\\rok\\007\\000\\302\\2332J\\010\\342\\200\\256txt.exe\\n' >&2\nexit 3\n"
)
#: The terminal-visible controls plus the bidirectional ones (U+202E and its kin).
UNSAFE = [*CONTROLS, "\u202e", "\u202d", "\u2066", "\u200f"]


@pytest.fixture
def failed_call(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Path:
    """One audit row of a skill that wrote ``NASTY`` on stderr, failed with it, and got it as an argument."""
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / ".ongrid-state"))
    make_skill(
        root,
        "liar",
        script=LIAR_SH,
        schema={"type": "object", "properties": {"name": {"type": "string"}}},
    )
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(root))
    from clitools import cli  # a real process: its audit rows are chained when it exits

    ran = cli(root, "run", "liar", json.dumps({"name": "a\u202eb"}))
    assert ran.returncode == 1, ran.stderr
    return root


def test_audit_show_escapes_what_a_skill_wrote_and_a_caller_passed(
    failed_call: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = run_main(capsys, "audit", "show", "1")
    assert code == 0
    assert not any(c in out for c in UNSAFE), out
    lines = out.splitlines()
    assert f"stderr:       {NASTY_SHOWN}" in lines
    [error] = [line for line in lines if line.startswith("error:")]
    assert error.endswith(f": {NASTY_SHOWN}")
    assert '"name": "a\\u202eb"' in next(line for line in lines if line.startswith("arguments:"))
    # the stored row and --json keep the bytes (JSON escapes the controls its own way)
    code, out, _err = run_main(capsys, "audit", "show", "1", "--json")
    row = json.loads(out)
    assert (row["stderr_tail"], row["args"]) == ([NASTY], {"name": "a\u202eb"})


def test_audit_show_keeps_a_multi_line_field_in_its_column(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ongrid_plugins.commands import audit

    class Row:
        def __getattr__(self, name: str) -> object:
            return {"remote": None, "stderr_tail": (), "approvers": (), "args": {}, "exit_code": None}.get(
                name, 0 if name in ("seq", "time", "duration", "pid") else "x"
            )

        error = "first\x1b[2J\nsecond"

    audit._print_entry(Row())  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("error:        first\\x1b[2J")
    assert lines[at + 1] == " " * 14 + "second"


def test_audit_list_and_tail_escape_stored_fields(
    failed_call: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (("audit", "list"), ("audit", "tail")):
        code, out, _err = run_main(capsys, *argv)
        assert code == 0 and "liar" in out
        assert not any(c in out for c in UNSAFE), out


def test_approvals_show_and_list_escape_stored_fields(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ongrid_plugins import SkillHost
    from ongrid_plugins.errors import ApprovalRequired
    from ongrid_plugins.settings import Settings

    make_skill(
        root,
        "wipe",
        class_="dangerous",
        schema={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(root))
    host = SkillHost(Settings.from_env(skill_dirs=[str(root)], include_defaults=False))
    with pytest.raises(ApprovalRequired) as info:
        host.call("wipe", {"path": "/srv/\u202eatad"}, persona="admin", caller="eve")
    ticket = info.value.ticket
    assert ticket is not None
    host.approve(ticket.id, approver="bob\u202e", note="fine\x9b2J\u202e", sop="SOP\u202e")
    code, out, _err = run_main(capsys, "approvals", "show", ticket.id)
    assert code == 0
    assert not any(c in out for c in UNSAFE), out
    assert '"path": "/srv/\\u202eatad"' in out and "fine\\x9b2J\\u202e" in out
    code, out, _err = run_main(capsys, "approvals", "list")
    assert code == 0 and "wipe" in out
    assert not any(c in out for c in UNSAFE), out
    code, out, _err = run_main(capsys, "approvals", "show", ticket.id, "--json")
    assert json.loads(out)["args"] == {"path": "/srv/\u202eatad"}
