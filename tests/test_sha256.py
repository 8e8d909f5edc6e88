"""``models.sha256_hex``: the compiled SHA-256 gives hashlib's digest for every input.

Every call's argument digest (what a confirmation and an approval are bound to), its
result digest and every audit row's hash in the chain come from it, so one wrong bit is
a broken approval or a chain that no longer verifies. Both compiled paths (the CPU's SHA
extensions where it has them, and the portable one other machines run) are held to
hashlib over random data, every length around the block boundaries, and large inputs.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ongrid_plugins.models import base, sha256_hex

_speedups = pytest.importorskip("ongrid_plugins._speedups")
BOTH = pytest.mark.parametrize(
    "digest", [_speedups.sha256_hex, _speedups.sha256_hex_portable], ids=["in-use", "portable"]
)


def reference(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def test_the_compiled_digest_is_the_one_in_use() -> None:
    assert sha256_hex is _speedups.sha256_hex
    assert sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@BOTH
def test_every_length_around_the_block_boundaries_gives_hashlibs_digest(digest: object) -> None:
    data = os.urandom(300)
    for n in range(300):  # 0-299: one, two and three blocks, every padding case
        assert digest(data[:n]) == reference(data[:n]), n  # type: ignore[operator]


@BOTH
def test_large_inputs_give_hashlibs_digest_and_leave_other_threads_running(digest: object) -> None:
    for n in (64 * 1024 - 1, 64 * 1024, 3 * 1024 * 1024 + 17):  # the last ones hash without the GIL
        data = os.urandom(n)
        assert digest(data) == reference(data), n  # type: ignore[operator]
    seen: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            seen.append(time.perf_counter())

    ticker = threading.Thread(target=tick)
    big = os.urandom(64 * 1024 * 1024)
    ticker.start()
    try:
        time.sleep(0.01)
        started = time.perf_counter()
        digest(big)  # type: ignore[operator]
        ended = time.perf_counter()
    finally:
        stop.set()
        ticker.join()
    middle = (started + (ended - started) / 4, ended - (ended - started) / 4)
    # Python code ran in the other thread while the digest was being made: only possible
    # when the GIL is released around the hashing.
    assert any(middle[0] < moment < middle[1] for moment in seen)


@BOTH
@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2000) | st.text(max_size=700))
def test_any_bytes_or_text_gives_hashlibs_digest(digest: object, data: bytes | str) -> None:
    assert digest(data) == reference(data)  # type: ignore[operator]


@BOTH
def test_what_is_not_bytes_or_text_is_refused_as_str_encode_refuses_it(digest: object) -> None:
    with pytest.raises(UnicodeEncodeError):
        digest("lone \udcff surrogate")  # type: ignore[operator]
    for bad in (None, 1, bytearray(b"x"), memoryview(b"x"), ["a"]):
        with pytest.raises(TypeError, match="bytes or str"):
            digest(bad)  # type: ignore[operator]


def test_a_compiled_digest_that_disagrees_with_hashlib_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_speedups, "sha256_hex", lambda data: "0" * 64)
    chosen = base._compiled_sha256()
    assert chosen is base._hashlib_hex
    assert chosen("abc") == reference("abc") and chosen(b"abc") == reference(b"abc")


def test_the_digests_built_on_it_are_hashlibs() -> None:
    from ongrid_plugins.audit.chain import row_hash
    from ongrid_plugins.models import args_digest, canonical_json

    args = {"city": "Zürich", "n": [1, 2.5, None]}
    assert args_digest("weather", args) == reference("weather\0" + canonical_json(args))
    row = [1, 2.0, "id", "t", None, "x"]
    assert row_hash(row) == reference(canonical_json(row))
