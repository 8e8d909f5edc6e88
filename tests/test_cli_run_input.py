"""How ``ongrid-skills run`` reads a call's arguments: any option order, bounded input, hints.

Hostile input (an endless device, a FIFO, JSON nested thousands deep) must end in one
``ERROR:`` line and exit code 2, never a hang, a memory blow-up or a traceback.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_plugins.cli import main
from ongrid_plugins.testing import make_skill

#: The limits the README promises (checked against the module's constants below).
MAX_ARGS_BYTES = 1024 * 1024
MAX_ARGS_DEPTH = 64


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--no-defaults", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli(
    root: Path, *argv: str, stdin: bytes = b"", timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """The command in a fresh process whose address space is capped at 1 GiB (an unbounded
    read fails fast there instead of eating the machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env["ONGRID_SKILLS_EXTERNAL_DIRS"] = str(root)

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", *argv],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
        preexec_fn=cap_memory,
    )


@pytest.fixture
def skills(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``greet`` echoes its arguments back; ``change`` is mutating."""
    make_skill(root, "greet", schema={"type": "object", "properties": {"who": {"type": "string"}}})
    make_skill(root, "change", class_="mutating")
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(root))
    return root


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# ---------------------------------------------------------------------- option order


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "greet", "--timeout", "5", '{"who": "ada"}'],
        ["run", "greet", "--json", '{"who": "ada"}'],
        ["run", "--timeout", "5", "greet", "--persona", "viewer", '{"who": "ada"}'],
        ["run", "greet", '{"who": "ada"}', "--timeout", "5"],
    ],
    ids=["timeout_first", "json_first", "between_and_before", "after"],
)
def test_options_may_come_before_between_or_after_the_arguments(
    skills: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run_main(capsys, *argv)
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert result.get("value", result) == {"who": "ada"}


def test_yes_before_the_arguments_confirms_a_mutating_call(
    skills: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "run", "change", "--yes", '{"path": "/srv"}')
    assert (code, err, json.loads(out)) == (0, "", {"path": "/srv"})


def test_a_dash_after_an_option_still_reads_stdin(skills: Path) -> None:
    result = cli(skills, "run", "greet", "--timeout", "5", "-", stdin=b'{"who": "bo"}')
    assert (result.returncode, json.loads(result.stdout)) == (0, {"who": "bo"})


def test_a_second_positional_is_still_refused(skills: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(capsys, "run", "greet", "--json", "{}", "{}")
    assert code == 2
    assert "unrecognized arguments: {}" in err


# ---------------------------------------------------------------------- bounded input


def test_args_file_from_an_endless_device_is_refused_without_reading(skills: Path) -> None:
    result = cli(skills, "run", "greet", "--args-file", "/dev/zero", timeout=30)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "ERROR: --args-file /dev/zero is not a regular file (a device): give a regular file, "
        "or pipe the arguments to `ongrid-skills --no-defaults run greet -`\n"
    )


def test_args_file_that_is_a_fifo_is_refused_without_waiting(skills: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "args.fifo"
    os.mkfifo(fifo)
    result = cli(skills, "run", "greet", "--args-file", str(fifo), timeout=30)
    assert result.returncode == 2
    assert f"--args-file {fifo} is not a regular file (a FIFO)" in result.stderr.decode()


def test_args_file_that_is_a_directory_is_refused(
    skills: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = run_main(capsys, "run", "greet", "--args-file", str(tmp_path))
    assert code == 2
    assert f"ERROR: --args-file {tmp_path} is not a regular file (a folder)" in err


@pytest.mark.parametrize("how", ["file", "stdin", "argv"])
def test_arguments_over_the_limit_are_refused(
    skills: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    big = b'{"who": "' + b"a" * MAX_ARGS_BYTES + b'"}'
    if how == "file":
        (tmp_path / "big.json").write_bytes(big)
        result = cli(skills, "run", "greet", "--args-file", str(tmp_path / "big.json"))
        source = f"--args-file {tmp_path / 'big.json'}"
    elif how == "stdin":
        result = cli(skills, "run", "greet", "-", stdin=big)
        source = "stdin"
    else:  # in this process: a command line this long is more than Linux passes to exec
        code = main(["--no-defaults", "run", "greet", big.decode()])
        result = subprocess.CompletedProcess([], code, b"", capsys.readouterr().err.encode())
        source = "ARGS_JSON"
    assert result.returncode == 2
    assert result.stderr.decode() == (
        f"ERROR: the arguments in {source} are larger than the limit of 1 MiB ({MAX_ARGS_BYTES} bytes): "
        "pass big data as a file the skill reads, not as an argument\n"
    )


def test_arguments_just_under_the_limit_are_read(skills: Path, tmp_path: Path) -> None:
    text = '{"who": "' + "a" * (MAX_ARGS_BYTES - 20) + '"}'
    (tmp_path / "args.json").write_text(text)
    result = cli(skills, "run", "greet", "--args-file", str(tmp_path / "args.json"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"who": "a" * (MAX_ARGS_BYTES - 20)}


def test_an_endless_stdin_is_cut_at_the_limit(skills: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
        env["ONGRID_SKILLS_EXTERNAL_DIRS"] = str(skills)
        result = subprocess.run(
            [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "run", "greet", "-"],
            stdin=zero,
            capture_output=True,
            env=env,
            timeout=30,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)),
        )
    assert result.returncode == 2
    assert result.stderr.decode().startswith(
        "ERROR: the arguments in stdin are larger than the limit of 1 MiB"
    )


# ---------------------------------------------------------------------- nesting


@pytest.mark.parametrize("depth", [MAX_ARGS_DEPTH + 1, 3000])
def test_arguments_nested_too_deeply_on_the_command_line(
    skills: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    code, out, err = run_main(capsys, "run", "greet", nested(depth))
    assert (code, out) == (2, "")
    assert err == (
        f"ERROR: the arguments in ARGS_JSON are nested too deeply (at most {MAX_ARGS_DEPTH} levels): "
        "see `ongrid-skills --no-defaults show greet` for the arguments it takes\n"
    )


def test_arguments_nested_100000_deep_in_a_file(skills: Path, tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text('{"who": ' + nested(100_000) + "}")
    result = cli(skills, "run", "greet", "--args-file", str(tmp_path / "deep.json"))
    assert result.returncode == 2
    err = result.stderr.decode()
    assert "Traceback" not in err
    assert err.startswith(
        f"ERROR: the arguments in --args-file {tmp_path / 'deep.json'} are nested too deeply"
    )
    assert f"(at most {MAX_ARGS_DEPTH} levels)" in err


def test_arguments_at_the_depth_limit_are_read(skills: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deepest = '{"who": "x", "more": ' + nested(MAX_ARGS_DEPTH - 1) + "}"
    code, out, err = run_main(capsys, "run", "greet", deepest)
    assert (code, err) == (0, "")
    assert json.loads(out)["who"] == "x"


# ---------------------------------------------------------------------- hints


@pytest.mark.parametrize(
    ("typed", "example"),
    [
        ("who=ada", """'{"who": "ada"}'"""),
        ("n=5", """'{"n": 5}'"""),
        ("who=ada,loud=true", """'{"who": "ada", "loud": true}'"""),
        ("who=o'hara", """'{"who": "o'"'"'hara"}'"""),
    ],
)
def test_key_equals_value_gets_the_json_form_it_meant(
    skills: Path, capsys: pytest.CaptureFixture[str], typed: str, example: str
) -> None:
    code, out, err = run_main(capsys, "run", "greet", typed)
    assert (code, out) == (2, "")
    first, _, rest = err.partition("\n")
    assert first.startswith("ERROR: the arguments in ARGS_JSON are not valid JSON: Expecting value")
    assert first.endswith(f"; give a JSON object, e.g. {example}")
    assert rest == ""


def test_other_bad_json_points_at_the_tool_schema(skills: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(capsys, "run", "greet", "{not json")
    assert code == 2
    assert err.endswith(
        "; give a JSON object (see `ongrid-skills --no-defaults show greet` for the arguments it takes)\n"
    )


@pytest.mark.parametrize("source", ["argument", "stdin"])
def test_arguments_naming_a_member_twice_are_refused_as_rest_refuses_them(
    skills: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """The CLI ran '{"who": "a", "who": "b"}' with the last value; REST answers 400."""
    import io

    text = '{"who": "ada", "nested": {"x": 1, "x": 2}}'
    if source == "stdin":
        monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, err = run_main(capsys, "run", "greet", "-" if source == "stdin" else text)
    assert (code, out) == (2, "")
    assert "are ambiguous: the member 'x' is given twice in one object; give each member once" in err


def test_the_limits_are_the_documented_ones() -> None:
    from ongrid_plugins.commands import callargs

    assert (callargs.MAX_ARGS_BYTES, callargs.MAX_ARGS_DEPTH) == (MAX_ARGS_BYTES, MAX_ARGS_DEPTH)
