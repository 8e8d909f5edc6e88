"""What Landlock does not rule, attacked for real: metadata, /sys and /proc/sys, System V IPC.

Landlock decides who opens and writes files. It does not see ``chmod``, ``utime`` or
``setxattr``, which a uid 0 without capabilities may still do to every file it owns
(on a root host: all of them), nor writes to a cgroup's ``tasks`` file, nor System V
IPC. Each attack below worked before the call's namespace made those mounts
read-only and gave the call an IPC namespace of its own.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from procs import dead

from ongrid_plugins import SkillHost
from ongrid_plugins.executors.confine import support
from ongrid_plugins.testing import assert_ok, isolated_settings, make_skill

SUPPORT = support()
pytestmark = pytest.mark.skipif(
    bool(SUPPORT.missing()) or not SUPPORT.mount_namespace,
    reason="this machine lacks " + ("; ".join(SUPPORT.missing()) or "a mount namespace (a root host)"),
)

PROBE = f"""#!{sys.executable}
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
args = json.load(sys.stdin)
out = []
for action, target in args["actions"]:
    try:
        if action == "chmod":
            os.chmod(target, 0o777)
        elif action == "utime":
            os.utime(target, (0, 0))
        elif action == "setxattr":
            os.setxattr(target, "user.ongrid-test", b"x")
        elif action == "write":
            with open(target, "w") as f:
                f.write("x")
        elif action == "shm_read":
            shm = libc.shmget(int(target), 0, 0)
            if shm < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            out.append("ok:" + ctypes.string_at(libc.shmat(shm, None, 0), 16).decode())
            continue
        elif action == "shm_create":
            if libc.shmget(int(target), 4096, 0o1666) < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        elif action == "sh":
            p = subprocess.run(["/bin/sh", "-c", target], capture_output=True, text=True, timeout=20)
            out.append("rc=%d:%s%s" % (p.returncode, p.stdout, p.stderr))
            continue
        out.append("ok")
    except OSError as exc:
        out.append("errno:%d" % exc.errno)
print(json.dumps({{"results": out}}))
"""

EROFS, ENOENT = "errno:30", "errno:2"


def _probe(root: Path, name: str, **fields: Any) -> None:
    fields.setdefault("env_allow", ["PATH"])
    make_skill(root, name, script=PROBE, entry="probe.py", **fields)


def _run(host: SkillHost, name: str, *actions: tuple[str, str], **kw: Any) -> list[str]:
    value = assert_ok(host.call(name, {"actions": [list(a) for a in actions]}, **kw))
    return value["results"]


@pytest.fixture
def box(tmp_path: Path) -> dict[str, Any]:
    """A host whose state folder is outside ``/tmp`` (the private /tmp would hide it anyway)."""
    assert not str(tmp_path).startswith("/tmp/"), "the suite's basetemp must be outside /tmp"
    root = tmp_path / "skills"
    root.mkdir()
    _probe(root, "reader")  # safe
    _probe(root, "writer", class_="mutating")  # undeclared: writes anywhere but the hidden folders
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    state = Path(host.settings.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    victim = state / "journal-like"  # any file of the state folder (the real ones are in use)
    victim.write_text("rows")
    victim.chmod(0o600)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file").write_text("data")
    (outside / "file").chmod(0o600)
    return {"host": host, "state": state, "victim": victim, "outside": outside / "file"}


def _in_a_namespace(job: Any) -> Any:
    """``job()`` in a throw-away thread with a mount namespace of its own (the host's mounts
    stay as they are); its value, or the exception it raised, raised here."""
    import threading

    from ongrid_plugins.executors.confine import mounts

    seen: dict[str, Any] = {}

    def run() -> None:
        try:
            mounts.enter_own_namespace()
            seen["value"] = job()
        except BaseException as exc:
            seen["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if "error" in seen:
        raise seen["error"]
    return seen["value"]


def _meta(path: Path) -> tuple[int, int, list[str]]:
    st = path.stat()  # a folder's mtime moves with the host's own files: not compared
    return stat.S_IMODE(st.st_mode), 0 if path.is_dir() else st.st_mtime_ns, os.listxattr(path)


def test_a_safe_skill_cannot_chmod_utime_or_setxattr_a_hidden_or_an_outside_file(box: dict[str, Any]) -> None:
    targets = [box["state"], box["victim"], box["outside"]]
    before = [_meta(t) for t in targets]
    actions = [(a, str(t)) for t in targets for a in ("chmod", "utime", "setxattr")]
    assert _run(box["host"], "reader", *actions) == [EROFS] * len(actions)
    assert [_meta(t) for t in targets] == before


def test_a_safe_skill_still_changes_what_it_made_in_its_private_tmp(box: dict[str, Any]) -> None:
    made = f"/tmp/made-{time.time_ns()}"
    assert _run(box["host"], "reader", ("write", made), ("chmod", made), ("utime", made)) == ["ok"] * 3


def test_an_undeclared_mutating_skill_writes_outside_but_cannot_touch_the_hosts_state(
    box: dict[str, Any],
) -> None:
    before = _meta(box["victim"])
    actions = [("chmod", str(box["victim"])), ("utime", str(box["victim"])), ("chmod", str(box["state"]))]
    results = _run(
        box["host"], "writer", ("chmod", str(box["outside"])), *actions, persona="admin", confirm=True
    )
    assert results == ["ok"] + [EROFS] * len(actions)  # its reach elsewhere is unchanged
    assert _meta(box["victim"]) == before
    assert stat.S_IMODE(box["state"].stat().st_mode) != 0o777


def test_a_skill_cannot_leave_its_cgroup_nor_write_kernel_settings(box: dict[str, Any]) -> None:
    """The attack: move a setsid'd sleeper into the root cgroups, so it outlives the call."""
    pidfile = box["outside"].parent / "leak.pid"
    escape = (
        f"setsid sh -c 'echo $$ > {pidfile}; for f in /sys/fs/cgroup/*/tasks /sys/fs/cgroup/cgroup.procs; do "
        '[ -e "$f" ] && echo $$ > "$f"; done; exec sleep 300\' </dev/null >/dev/null 2>&1 & sleep 0.5; '
        "cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname && echo wrote-hostname"
    )
    [result] = _run(box["host"], "writer", ("sh", escape), persona="admin", confirm=True)
    assert "Read-only file system" in result and "wrote-hostname" not in result, result
    pid = int(pidfile.read_text())
    assert dead(pid, 5), f"the sleeper {pid} outlived the call"


def _shm(key: int, size: int, flags: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.shmget(key, size, flags))


def test_a_skill_sees_none_of_the_hosts_ipc_and_leaves_none_behind(box: dict[str, Any]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    host_key, skill_key = 0x4F470000 + os.getpid() % 0xFFFF, 0x4F480000 + os.getpid() % 0xFFFF
    shm = _shm(host_key, 4096, 0o1600)  # IPC_CREAT, owner only: the host's own
    assert shm >= 0
    try:
        ctypes.memmove(libc.shmat(shm, None, 0), b"HOST-SECRET-0600", 16)
        results = _run(box["host"], "reader", ("shm_read", str(host_key)), ("shm_create", str(skill_key)))
        assert results == [ENOENT, "ok"]  # its own segment, in a namespace of its own
        assert _shm(skill_key, 0, 0) == -1 and ctypes.get_errno() == 2  # freed with the call
    finally:
        libc.shmctl(shm, 0, None)  # IPC_RMID


def test_the_hosts_own_sys_stays_writable_after_confined_calls(box: dict[str, Any]) -> None:
    # the host joins and empties the call's cgroup: the read-only /sys is the call's alone
    for _ in range(3):
        assert _run(box["host"], "writer", ("sh", "true"), persona="admin", confirm=True) == ["rc=0:"]
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        sys_mount = [line.split(" ")[5] for line in f if line.split(" ")[4] == "/sys"]
    assert sys_mount and "rw" in sys_mount[0].split(","), json.dumps(sys_mount)


def test_without_mount_setattr_each_mount_is_remounted_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels before 5.12 lack ``mount_setattr``: every mount at and beneath the path is
    remounted read-only one by one, keeping its nosuid/nodev/noexec."""

    from ongrid_plugins.executors.confine import _sys, mounts

    real = _sys.syscall

    def no_setattr(name: str, *args: object) -> int:
        if name == "mount_setattr":
            raise OSError(38, "mount_setattr: not available")
        return real(name, *args)

    monkeypatch.setattr(_sys, "syscall", no_setattr)

    def protected() -> list[list[str]]:
        mounts.protect_system()
        with open("/proc/thread-self/mountinfo", encoding="utf-8") as f:
            return [line.split(" ")[4:6] for line in f]

    seen = {"mounts": _in_a_namespace(protected)}
    under_sys = {
        point: options.split(",") for point, options in seen["mounts"] if point.split("/")[1:2] == ["sys"]
    }
    assert "/sys" in under_sys and len(under_sys) > 1  # /sys and its cgroup mounts beneath
    assert all("ro" in options for options in under_sys.values()), under_sys
    proc_sys = [options for point, options in seen["mounts"] if point == "/proc/sys"]
    assert proc_sys and "ro" in proc_sys[-1].split(",")


def test_a_declared_write_path_stays_writable_and_nothing_else_can_be_chmod_ed(
    box: dict[str, Any], tmp_path: Path
) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    root = tmp_path / "skills2"
    _probe(root, "declared", class_="mutating", sandbox={"write": [str(allowed)]})
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    inside = allowed / "new"
    before = _meta(box["outside"])
    results = _run(
        host,
        "declared",
        ("write", str(inside)),
        ("chmod", str(inside)),
        ("utime", str(allowed)),
        ("chmod", str(box["outside"])),
        ("setxattr", str(box["outside"])),
        persona="admin",
        confirm=True,
    )
    assert results == ["ok", "ok", "ok", EROFS, EROFS]
    assert stat.S_IMODE(inside.stat().st_mode) == 0o777
    assert _meta(box["outside"]) == before


VOLUME_CALL = """
import json, sys
from ongrid_plugins import SkillHost
from ongrid_plugins.testing import isolated_settings
tmp, root, made = sys.argv[1:4]
host = SkillHost(isolated_settings(tmp, root))
host.load()
result = host.call("declared", {"actions": [["write", made], ["chmod", made]]}, persona="admin", confirm=True)
print(json.dumps(result.value))
"""


def test_a_volume_mounted_inside_a_declared_write_path_stays_there_and_writable(tmp_path: Path) -> None:
    """The write path is bound onto itself with what is mounted beneath it: a bind without
    them would show the empty folder under the volume (and put the writes there). In a
    process of its own: ready threads made before the volume was mounted do not see it."""
    import subprocess

    from ongrid_plugins.executors.confine import mounts

    allowed = tmp_path / "allowed"
    (allowed / "disk1").mkdir(parents=True)
    root = tmp_path / "skills2"
    _probe(root, "declared", class_="mutating", sandbox={"write": [str(allowed)]})
    mounts._mount(b"tmpfs", os.fsencode(allowed / "disk1"), b"tmpfs", 0, b"size=1m")
    try:
        (allowed / "disk1" / "on-the-volume").write_text("v")
        made = allowed / "disk1" / "made"
        argv = [sys.executable, "-c", VOLUME_CALL, str(tmp_path), str(root), str(made)]
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout.splitlines()[-1])["results"] == ["ok", "ok"]
        assert sorted(p.name for p in (allowed / "disk1").iterdir()) == ["made", "on-the-volume"]
    finally:
        mounts._sys.syscall("umount2", os.fsencode(allowed / "disk1"), 2)


def test_a_declared_write_path_that_links_into_tmp_does_not_fail_the_call(
    box: dict[str, Any], tmp_path: Path
) -> None:
    link = tmp_path / "out"
    link.symlink_to(tempfile_dir := Path(__import__("tempfile").mkdtemp(dir="/tmp")))
    try:
        root = tmp_path / "skills3"
        _probe(root, "linked", class_="mutating", sandbox={"write": [str(link)]})
        host = SkillHost(isolated_settings(tmp_path, root))
        host.load()
        assert _run(host, "linked", ("chmod", str(box["outside"])), persona="admin", confirm=True) == [EROFS]
    finally:
        import shutil

        shutil.rmtree(tempfile_dir, ignore_errors=True)


def test_mountinfo_is_read_as_bytes_whatever_the_mount_points_are_called(tmp_path: Path) -> None:
    """The fallback's listing: a mount point named in another script (or with a space) is
    decoded, not a crash of every confined call."""

    from ongrid_plugins.executors.confine import mounts

    named = tmp_path / "ディスク é x"
    named.mkdir()

    def listed() -> list[str]:
        mounts._mount(b"tmpfs", os.fsencode(named), b"tmpfs", 0, b"size=1m")
        return [p for p, _o in mounts._mounts_at(str(tmp_path), recursive=True)]

    assert str(named) in _in_a_namespace(listed)


def test_a_hidden_folder_inside_a_declared_write_path_stays_unchangeable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``write: [~]`` grants the home folder, not ``~/.ssh`` in it: Landlock carves it out of
    the writes, and its mount is read-only, so it cannot be chmod-ed either."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / "work").mkdir()  # the home folder itself takes no new entry: it holds a hidden one
    key = home / ".ssh" / "id_rsa"
    key.write_text("PRIVATE")
    key.chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "skills4"
    _probe(root, "homely", class_="mutating", sandbox={"write": [str(home)]})
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    results = _run(
        host,
        "homely",
        ("write", str(home / "work" / "notes")),
        ("chmod", str(key)),
        persona="admin",
        confirm=True,
    )
    assert results == ["ok", EROFS]
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


PRLIMIT = f"""#!{sys.executable}
import json, os, resource, sys
json.load(sys.stdin)
out = {{}}
try:
    resource.prlimit(os.getppid(), resource.RLIMIT_CORE, (0, 0))
    out["host"] = "lowered"
except OSError as exc:
    out["host"] = "errno:%d" % exc.errno
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # its own: prlimit64 with pid 0
out["own"] = resource.getrlimit(resource.RLIMIT_CORE)
print(json.dumps(out))
"""


def test_a_skill_cannot_lower_the_hosts_limits_but_sets_its_own(box: dict[str, Any]) -> None:
    """The attack: prlimit(2) on the host (same uid) lowered its open files, file size or
    CPU time: its audit log stopped, or SIGXCPU killed it. Here the harmless core size."""
    import resource

    make_skill(box["host"].settings.skill_dirs[0], "limits", script=PRLIMIT, entry="limits.py")
    box["host"].load()
    before = resource.getrlimit(resource.RLIMIT_CORE)
    try:
        value = assert_ok(box["host"].call("limits", {}))
        assert resource.getrlimit(resource.RLIMIT_CORE) == before
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, before)
    assert value == {"host": "errno:1", "own": [0, 0]}


DEVICES = f"""#!{sys.executable}
import json, os, sys
out = {{}}
for path in json.load(sys.stdin)["paths"]:
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        out[path] = "opened"
    except OSError as exc:
        out[path] = "errno:%d" % exc.errno
print(json.dumps(out))
"""


def test_a_skill_opens_the_usual_devices_but_no_disk_terminal_or_console(box: dict[str, Any]) -> None:
    """The attack: a safe skill read the disk under the hidden state folder through its
    raw block device (grep on /dev/sdX), and the consoles' screens through /dev/vcs*."""
    devices = [f"/dev/{name}" for name in sorted(os.listdir("/dev"))]
    kinds = {p: os.stat(p, follow_symlinks=False).st_mode for p in devices}
    raw = [p for p in devices if stat.S_ISBLK(kinds[p])][:3]
    raw += [p for p in ("/dev/kmsg", "/dev/console", "/dev/tty1", "/dev/vcs", "/dev/ptmx") if p in kinds]
    assert raw, "this machine has none of the devices to try"
    usual = ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/full"]
    make_skill(box["host"].settings.skill_dirs[0], "devices", script=DEVICES, entry="devices.py")
    box["host"].load()
    value = assert_ok(box["host"].call("devices", {"paths": usual + raw}))
    assert {p: value[p] for p in usual} == dict.fromkeys(usual, "opened")
    assert {p: value[p] for p in raw} == dict.fromkeys(raw, "errno:13"), value


def test_an_undeclared_mutating_skill_cannot_write_the_hosts_proc_knobs(box: dict[str, Any]) -> None:
    """The attack: set the host's oom_score_adj to 1000 (the OOM killer's first victim)."""
    knob = Path(f"/proc/{os.getpid()}/oom_score_adj")
    before = knob.read_text()
    actions = [("sh", f"echo 1000 > {knob} && echo wrote"), ("write", f"/proc/{os.getpid()}/coredump_filter")]
    results = _run(box["host"], "writer", *actions, persona="admin", confirm=True)
    assert "Read-only file system" in results[0] and "wrote" not in results[0], results
    assert results[1] == EROFS
    assert knob.read_text() == before


@pytest.mark.parametrize("declared", ["/", "/dev", "link-to-dev", "a-device"])
def test_no_declaration_grants_a_device_beyond_the_usual_ones(
    box: dict[str, Any], tmp_path: Path, declared: str
) -> None:
    """Found in review: a safe skill declaring read ["/"] (or /dev, or a link to it) opened
    /dev/loop0, though no declaration may grant a device."""
    devices = [f"/dev/{name}" for name in sorted(os.listdir("/dev"))]
    raw = [p for p in devices if stat.S_ISBLK(os.stat(p, follow_symlinks=False).st_mode)][:2]
    raw += [p for p in ("/dev/kmsg", "/dev/console") if os.path.exists(p)]
    assert raw, "this machine has none of the devices to try"
    path = {"link-to-dev": str(tmp_path / "devlink"), "a-device": raw[0]}.get(declared, declared)
    if declared == "link-to-dev":
        os.symlink("/dev", path)
    make_skill(
        box["host"].settings.skill_dirs[0],
        "wide",
        script=DEVICES,
        entry="devices.py",
        sandbox={"read": [path]},
    )
    report = box["host"].load()
    assert not [e for e in report.errors if "wide" in e.message], [e.message for e in report.errors]
    value = assert_ok(box["host"].call("wide", {"paths": ["/dev/null", *raw]}))
    assert value == {"/dev/null": "opened", **dict.fromkeys(raw, "errno:13")}, value
