"""A child forked while another thread holds one of the host's module locks does not hang.

A host has threads of its own (the warm pool's refiller, the remote results reader,
the catalog watcher), and an embedding application has its own; a fork copies a lock in
whatever state it was, with no thread left in the child to release it.
The attack: a thread holds the lock, the process forks, and the child takes the lock the
way its next call would. Each lock is made anew in the child (``os.register_at_fork``).
A child that hangs is killed after a few seconds and fails the test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins.audit import AuditLog
from ongrid_plugins.catalog import digest
from ongrid_plugins.catalog.events import Hub
from ongrid_plugins.core import forksafe
from ongrid_plugins.executors.confine import cgroups, grants
from ongrid_plugins.testing import make_skill


def _in_child_while_held(lock: Any, child: Callable[[], object]) -> int:
    """Fork while a thread holds ``lock``; the child's exit code (-1: it hung and was killed)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: take the lock as the next call would, then out
        code = 1
        try:
            child()
            code = 0
        except BaseException:
            traceback.print_exc()  # to the test's captured stderr: why the child failed
        finally:
            os._exit(code)
    release.set()
    holder.join()
    deadline = time.monotonic() + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -1
        time.sleep(0.01)


def _takes(module: Any, name: str) -> Callable[[], None]:
    """What the child does: take the module's lock (as it is named in the child) within 5 s."""

    def take() -> None:
        lock = getattr(module, name)
        assert lock.acquire(timeout=5), f"{name} is still held in the child"
        lock.release()

    return take


def test_the_cgroup_pool_locks_held_at_the_fork_do_not_hang_the_child() -> None:
    # the refiller holds _pool_lock while it reads every pooled group's counters
    assert _in_child_while_held(cgroups._pool_lock, cgroups._remove_own) == 0
    assert _in_child_while_held(cgroups._counter_lock, _takes(cgroups, "_counter_lock")) == 0


def test_the_grant_bases_lock_held_at_the_fork_does_not_hang_the_child() -> None:
    assert _in_child_while_held(grants._bases_lock, _takes(grants, "_bases_lock")) == 0


def test_an_audit_logs_lock_held_at_the_fork_does_not_hang_the_child(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.db"))
    assert log.recover() == 0  # the parent's connection, made under the lock

    def child() -> None:
        assert log.recover() == 0  # takes the lock, and opens the child's own connection
        assert log._store.pid == os.getpid()

    assert _in_child_while_held(log._store.lock, child) == 0
    assert log._store.pid == os.getpid()  # the parent's own state is untouched


def test_the_digest_memos_lock_held_at_the_fork_does_not_hang_the_child(tmp_path: Path) -> None:
    entry = tmp_path / "run.sh"
    entry.write_text("#!/bin/sh\n")
    os.utime(entry, (1_000_000_000, 1_000_000_000))  # old enough to be memoised: the lock is taken
    assert _in_child_while_held(digest._memo_lock, lambda: digest.file_sha256(str(entry))) == 0


def test_the_catalog_hubs_lock_held_at_the_fork_does_not_hang_the_child() -> None:
    hub = Hub()
    assert _in_child_while_held(hub._lock, lambda: hub.subscribe(lambda changes: None)()) == 0


def test_the_sandbox_warning_lock_held_at_the_fork_does_not_hang_the_child() -> None:
    from ongrid_plugins.executors import confine

    assert _in_child_while_held(confine._warned_lock, lambda: confine.warn_missing([])) == 0


def test_the_remote_subscriber_locks_held_at_the_fork_do_not_hang_the_child() -> None:
    results = pytest.importorskip("ongrid_plugins.remote.results", reason="the celery extra is not installed")
    url = "redis://127.0.0.1:1/0"  # never connected: the child only takes the locks
    assert _in_child_while_held(results._subscribers_lock, lambda: results.subscriber(url, 1.0)) == 0
    subscriber = results.subscriber(url, 2.0)
    assert _in_child_while_held(subscriber.lock, _takes(subscriber, "lock")) == 0


def test_without_the_renewal_the_child_hangs() -> None:
    # The attack without the defence: the same fork with the lock left out of the
    # registry leaves the child's lock held, so the tests above can fail.
    module_lock = threading.Lock()

    class Owner:
        lock = module_lock

    owner = Owner()

    def child() -> None:
        assert owner.lock.acquire(timeout=0.5), "still held"

    assert _in_child_while_held(owner.lock, child) == 1
    forksafe.renew_after_fork(owner, "lock")
    assert _in_child_while_held(owner.lock, child) == 0


def test_an_rlock_is_renewed_as_an_rlock_and_other_values_are_refused() -> None:
    class Owner:
        def __init__(self) -> None:
            self.reentrant = threading.RLock()
            self.plain = 5

    owner = Owner()
    forksafe.renew_after_fork(owner, "reentrant")

    def child() -> None:
        with owner.reentrant, owner.reentrant:  # re-entered: still an RLock
            pass

    assert _in_child_while_held(owner.reentrant, child) == 0
    with pytest.raises(TypeError, match="is not a Lock or an RLock"):
        forksafe.renew_after_fork(owner, "plain")


def test_a_dropped_owner_is_forgotten() -> None:
    class Owner:
        def __init__(self) -> None:
            self.lock = threading.Lock()

    owner = Owner()
    forksafe.renew_after_fork(owner, "lock")
    assert owner in forksafe._OWNERS
    before = len(forksafe._OWNERS)
    del owner
    assert len(forksafe._OWNERS) == before - 1


def test_a_child_forked_while_the_hosts_threads_hold_their_locks_reloads_and_calls(
    make_host: Any, root: Path
) -> None:
    # A pre-fork server: load, call, then fork while the digest memo's lock is held.
    make_skill(root, "echo", script="#!/bin/sh\necho '{\"ok\": 1}'\n")
    host = make_host(root)
    assert host.call("echo").ok
    held = [digest._memo_lock]

    def child() -> None:
        host.reload()
        result = host.call("echo")
        assert result.ok and result.value == {"ok": 1}, result.error
        assert host.audit.flush(5.0)
        assert host.audit.entries()[-1].pid == os.getpid()

    with contextlib.ExitStack() as stack:
        for lock in held[1:]:
            stack.enter_context(lock)  # held by this thread: a thread the child does not have
        assert _in_child_while_held(held[0], child) == 0
    assert host.call("echo").ok  # the parent goes on with its own locks


def test_an_owner_that_lost_its_lock_does_not_keep_the_others_from_renewal() -> None:
    class Owner:
        def __init__(self) -> None:
            self.lock = threading.Lock()

    broken, kept = Owner(), Owner()
    forksafe.renew_after_fork(broken, "lock")
    forksafe.renew_after_fork(kept, "lock")
    del broken.lock  # gone by the fork: skipped, and the next owner is still renewed
    assert _in_child_while_held(kept.lock, _takes(kept, "lock")) == 0


def test_a_forked_child_hands_out_call_ids_of_its_own() -> None:
    """A pre-fork server's workers must not repeat their parent's ids: an id keys a remote
    call's claim (``ongrid:claim:call:ID``) and an audit row's call."""
    from ongrid_plugins.host.facade import pipeline

    parent_first = pipeline._next_call_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, pipeline._next_call_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = f.read()
    os.waitpid(pid, 0)
    parent_next = pipeline._next_call_id()
    assert len(child) == len(parent_next) == 22
    assert child[:12] != parent_next[:12]  # its own prefix
    assert child != parent_next and parent_next[:12] == parent_first[:12]
