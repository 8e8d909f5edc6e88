"""Unpacking packs: hand-crafted hostile archives (zip-slip, tar-slip, links, devices, bombs) are refused."""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ongrid_plugins.packs.archive import Limits, UnsafeArchive, archive_kind, unpack

GOOD = {
    "greet/skill.json": b'{"name": "greet", "description": "d", "entry": "run.sh"}',
    "greet/run.sh": b"#!/bin/sh\n",
}


def tar_member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", **attrs: object) -> tuple:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.mode = 0o755 if name.endswith(".sh") else 0o644
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, (io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def make_tar(path: Path, members: list[tuple], compression: str = "gz") -> Path:
    with tarfile.open(path, f"w:{compression}") as tf:
        for info, data in members:
            tf.addfile(info, data)
    return path


def good_tar(path: Path, *extra: tuple) -> Path:
    members = [tar_member(name, data=data) for name, data in GOOD.items()]
    return make_tar(path, [*members, *extra])


def make_zip(path: Path, members: list[tuple[str, bytes, int]]) -> Path:
    """Members are (name, data, unix mode); mode 0 leaves the attributes alone."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode:
                info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


def refused(source: Path, tmp_path: Path, limits: Limits | None = None) -> UnsafeArchive:
    dest = Path(tempfile.mkdtemp(dir=tmp_path)) / "out"
    with pytest.raises(UnsafeArchive) as info:
        unpack(str(source), str(dest), limits)
    return info.value


# ------------------------------------------------------------------ good archives


@pytest.mark.parametrize("compression", ["gz", "bz2", "xz", ""])
def test_a_tar_pack_unpacks_with_execute_bits_and_internal_links(tmp_path: Path, compression: str) -> None:
    link = tar_member("greet/latest.sh", tarfile.SYMTYPE, linkname="run.sh")
    source = make_tar(
        tmp_path / "p.tar", [*(tar_member(n, data=d) for n, d in GOOD.items()), link], compression
    )
    report = unpack(str(source), str(tmp_path / "out"))
    assert (report.files, report.links) == (2, 1)
    assert stat.S_IMODE((tmp_path / "out/greet/run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "out/greet/skill.json").stat().st_mode) == 0o644
    assert os.readlink(tmp_path / "out/greet/latest.sh") == "run.sh"


def test_a_zip_pack_unpacks_and_keeps_only_the_permission_bits_that_matter(tmp_path: Path) -> None:
    source = make_zip(
        tmp_path / "p.zip",
        [("greet/", b"", stat.S_IFDIR | 0o755), ("greet/run.sh", b"#!/bin/sh\n", stat.S_IFREG | 0o4777)],
    )
    unpack(str(source), str(tmp_path / "out"))
    assert stat.S_IMODE((tmp_path / "out/greet/run.sh").stat().st_mode) == 0o755  # setuid and o+w dropped


def test_the_kind_of_archive_comes_from_its_bytes_not_its_name(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "looks.tar.gz", [("a/skill.json", b"{}", 0)])
    assert archive_kind(str(zipped)) == "zip"
    (tmp_path / "notes.zip").write_text("hello")
    assert archive_kind(str(tmp_path / "notes.zip")) is None
    assert "not a folder, a tar archive" in refused(tmp_path / "notes.zip", tmp_path).reason


# ------------------------------------------------------------------ tar-slip and friends


TAR_CASES: dict[str, tuple[Callable[[], tuple], str]] = {
    "dotdot": (lambda: tar_member("../evil.sh", data=b"x"), 'contains ".."'),
    "nested_dotdot": (lambda: tar_member("greet/../../evil", data=b"x"), 'contains ".."'),
    "absolute": (lambda: tar_member("/tmp/evil", data=b"x"), "is an absolute path"),
    "backslash": (lambda: tar_member("..\\evil", data=b"x"), "a backslash"),
    "abs_link": (
        lambda: tar_member("greet/l", tarfile.SYMTYPE, linkname="/etc/passwd"),
        "only relative links",
    ),
    "escaping_link": (lambda: tar_member("greet/l", tarfile.SYMTYPE, linkname="../../x"), "resolves outside"),
    "hard_link": (lambda: tar_member("greet/h", tarfile.LNKTYPE, linkname="greet/run.sh"), "is a hard link"),
    "char_device": (lambda: tar_member("greet/null", tarfile.CHRTYPE, devmajor=1, devminor=3), "is a device"),
    "block_device": (lambda: tar_member("greet/sda", tarfile.BLKTYPE, devmajor=8), "is a device"),
    "fifo": (lambda: tar_member("greet/pipe", tarfile.FIFOTYPE), "is a FIFO"),
    "duplicate": (lambda: tar_member("greet/run.sh", data=b"#!/bin/sh\nrm -rf ~\n"), "appears twice"),
}


@pytest.mark.parametrize("case", sorted(TAR_CASES))
def test_a_hostile_tar_member_is_refused_and_names_the_member(tmp_path: Path, case: str) -> None:
    member, reason = TAR_CASES[case]
    info, _data = member()
    error = refused(good_tar(tmp_path / "p.tar.gz", member()), tmp_path)
    assert reason in error.reason
    assert error.member in (info.name, info.name.rstrip("/"), "greet/l")
    assert str(error).startswith(str(tmp_path / "p.tar.gz"))
    assert not (tmp_path / "evil").exists() and not (tmp_path.parent / "evil.sh").exists()


def test_a_link_whose_real_path_escapes_through_another_link_is_refused(tmp_path: Path) -> None:
    # Each target looks inside the pack on its own ("up" -> "../..", taken from a/b/c,
    # is the pack's top); only resolved together does "esc" land above the pack.
    source = make_tar(
        tmp_path / "p.tar.gz",
        [
            tar_member("a/b/c/", tarfile.DIRTYPE),
            tar_member("a/b/c/up", tarfile.SYMTYPE, linkname="../../.."),
            tar_member("esc", tarfile.SYMTYPE, linkname="a/b/c/up/.."),
        ],
    )
    error = refused(source, tmp_path)
    assert (error.member, "resolves outside the pack") == (
        "esc",
        error.reason[-len("resolves outside the pack") :],
    )


@pytest.mark.parametrize("order", ["link_first", "file_first"])
def test_a_member_under_a_link_is_refused_whatever_the_order(tmp_path: Path, order: str) -> None:
    # The classic tar-slip through a symlink: "d" -> ".." then "d/evil" would be written outside.
    link = tar_member("d", tarfile.SYMTYPE, linkname="sub")
    inner = tar_member("d/evil", data=b"x")
    members = [
        tar_member("sub/", tarfile.DIRTYPE),
        *([link, inner] if order == "link_first" else [inner, link]),
    ]
    error = refused(make_tar(tmp_path / "p.tar.gz", members), tmp_path)
    assert "lies under a link" in error.reason or "other members lie under it" in error.reason


def test_nothing_is_written_outside_the_destination(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    members = [tar_member("sub/", tarfile.DIRTYPE), tar_member("d", tarfile.SYMTYPE, linkname="../outside")]
    members.append(tar_member("d/owned", data=b"x"))
    refused(make_tar(tmp_path / "p.tar.gz", members), tmp_path)
    assert list(outside.iterdir()) == []


# ------------------------------------------------------------------ zip-slip and friends


ZIP_CASES: dict[str, tuple[list[tuple[str, bytes, int]], str]] = {
    "dotdot": ([("../../evil.sh", b"x", 0)], 'contains ".."'),
    "absolute": ([("/etc/cron.d/evil", b"x", 0)], "is an absolute path"),
    "backslash": ([("..\\..\\evil", b"x", 0)], "a backslash"),
    "drive": ([("C:/evil", b"x", 0)], "drive letter"),
    "abs_link": ([("greet/l", b"/etc/passwd", stat.S_IFLNK | 0o777)], "only relative links"),
    "escaping_link": ([("greet/l", b"../../..", stat.S_IFLNK | 0o777)], "resolves outside"),
    "fifo": ([("greet/p", b"", stat.S_IFIFO | 0o644)], "is a FIFO"),
    "device": ([("greet/d", b"", stat.S_IFCHR | 0o644)], "is a device"),
    "socket": ([("greet/s", b"", stat.S_IFSOCK | 0o644)], "is a socket"),
}


@pytest.mark.parametrize("case", sorted(ZIP_CASES))
def test_a_hostile_zip_member_is_refused(tmp_path: Path, case: str) -> None:
    members, reason = ZIP_CASES[case]
    good = [(name, data, 0) for name, data in GOOD.items()]
    error = refused(make_zip(tmp_path / "p.zip", [*good, *members]), tmp_path)
    assert reason in error.reason and error.member == members[0][0]


def test_a_zip_with_a_name_twice_is_refused(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="Duplicate name"):
        source = make_zip(tmp_path / "p.zip", [("a/run.sh", b"1", 0), ("a/run.sh", b"2", 0)])
    assert "appears twice" in refused(source, tmp_path).reason


def test_an_encrypted_zip_member_is_refused(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "p.zip", [("a/secret", b"x", 0)])
    data = bytearray(source.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # general purpose flag, bit 0
        at = data.index(signature) + offset
        data[at] |= 0x1
    source.write_bytes(bytes(data))
    assert "is encrypted" in refused(source, tmp_path).reason


# ------------------------------------------------------------------ bombs and caps


def test_a_file_over_the_size_cap_is_refused_before_a_byte_is_written(tmp_path: Path) -> None:
    source = make_tar(tmp_path / "p.tar.gz", [tar_member("big.bin", data=b"\0" * 200_000)])
    error = refused(source, tmp_path, Limits(max_file_bytes=100_000))
    assert "200000 bytes; the limit per file is 100000" in error.reason
    assert not (tmp_path / "out" / "big.bin").exists()


def test_the_total_size_cap_counts_every_file(tmp_path: Path) -> None:
    members = [tar_member(f"f{i}.bin", data=b"\0" * 40_000) for i in range(4)]
    error = refused(make_tar(tmp_path / "p.tar.gz", members), tmp_path, Limits(max_total_bytes=100_000))
    assert "past the limit of 100000 bytes" in error.reason and error.member == "f2.bin"


def test_the_member_count_cap_holds_for_tar_and_zip(tmp_path: Path) -> None:
    tar = make_tar(tmp_path / "p.tar.gz", [tar_member(f"f{i}", data=b"x") for i in range(30)])
    assert "more than 20 members" in refused(tar, tmp_path, Limits(max_members=20)).reason
    zipped = make_zip(tmp_path / "p.zip", [(f"f{i}", b"x", 0) for i in range(30)])
    assert "has 30 members; the limit is 20" in refused(zipped, tmp_path, Limits(max_members=20)).reason


def test_a_zip_bomb_that_lies_about_its_size_is_cut_off_by_the_bytes_written(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "bomb.zip", [("bomb.bin", b"\0" * 2_000_000, 0)])
    data = bytearray(source.read_bytes())
    # Claim 1000 bytes uncompressed in both headers: the declared size passes the cap.
    local = data.index(b"PK\x03\x04")
    data[local + 22 : local + 26] = struct.pack("<I", 1000)
    central = data.index(b"PK\x01\x02")
    data[central + 24 : central + 28] = struct.pack("<I", 1000)
    source.write_bytes(bytes(data))
    error = refused(source, tmp_path, Limits(max_file_bytes=100_000))
    assert "Bad CRC-32 for file 'bomb.bin'" in str(error)  # zipfile stops at the declared 1000 bytes


def test_the_bytes_written_are_counted_whatever_size_was_declared(tmp_path: Path) -> None:
    from ongrid_plugins.packs.archive import _Stage

    stage = _Stage("lying.tar", str(tmp_path / "out"), Limits(max_file_bytes=100_000))
    with pytest.raises(UnsafeArchive, match="expands past the limit per file of 100000 B"):
        stage.add_file("big.bin", 0o644, io.BytesIO(b"\0" * 1_000_000), declared=10)
    assert (tmp_path / "out" / "big.bin").stat().st_size <= 100_000


def test_a_gzip_stream_that_expands_past_the_cap_is_refused(tmp_path: Path) -> None:
    # Pax headers are no files, so only the cap on the decompressed stream catches them
    # (each is under the limit of one extended header, together they are over the cap).
    with tarfile.open(tmp_path / "p.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for i in range(4):
            info, data = tar_member(f"small{i}", data=b"x")
            info.pax_headers = {"comment": "A" * 900_000}
            tf.addfile(info, data)
    error = refused(tmp_path / "p.tar.gz", tmp_path, Limits(max_total_bytes=100_000, max_members=10))
    assert "expands to more than" in error.reason


def test_a_corrupt_archive_is_refused_with_the_parser_message(tmp_path: Path) -> None:
    source = good_tar(tmp_path / "p.tar.gz")
    source.write_bytes(source.read_bytes()[:40])
    assert "archive" in str(refused(source, tmp_path)) or "unpack" in str(refused(source, tmp_path))


# ------------------------------------------------------------------ folders


def test_a_folder_is_copied_under_the_same_rules(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "greet" / ".git").mkdir(parents=True)
    (src / "greet" / ".git" / "HEAD").write_text("ref")
    (src / "greet" / "run.sh").write_text("#!/bin/sh\n")
    (src / "greet" / "run.sh").chmod(0o755)
    (src / "greet" / "alias.sh").symlink_to("run.sh")
    report = unpack(str(src), str(tmp_path / "out"))
    assert (report.files, report.links) == (1, 1)
    assert not (tmp_path / "out" / "greet" / ".git").exists()


@pytest.mark.parametrize("kind", ["fifo", "escaping_link", "absolute_link"])
def test_a_folder_with_a_special_file_or_an_escaping_link_is_refused(tmp_path: Path, kind: str) -> None:
    src = tmp_path / "src"
    src.mkdir()
    if kind == "fifo":
        os.mkfifo(src / "pipe")
    elif kind == "escaping_link":
        (src / "up").symlink_to("../../etc")
    else:
        (src / "passwd").symlink_to("/etc/passwd")
    error = refused(src, tmp_path)
    assert error.member in ("pipe", "up", "passwd")


def deep_tar(path: Path, levels: int) -> Path:
    """A tar of ``levels`` nested folders ``d/d/...``: tiny, but a frame per level to a recursive walk."""
    folders = [tar_member("/".join(["d"] * i), tarfile.DIRTYPE) for i in range(1, levels + 1)]
    return make_tar(path, folders)


def make_deep(top: Path, levels: int) -> None:
    """``top/d/d/...``, ``levels`` deep (os.makedirs would recurse once per level)."""
    top.mkdir()
    for _ in range(levels):
        top /= "d"
        top.mkdir()


def test_a_tree_deeper_than_the_depth_limit_is_refused_naming_the_member(deep_tmp_path: Path) -> None:
    error = refused(deep_tar(deep_tmp_path / "deep.tar.gz", 1400), deep_tmp_path)
    assert error.member == "/".join(["d"] * 65)
    assert "lies 65 levels deep; the limit is 64" in error.reason
    assert unpack(str(deep_tar(deep_tmp_path / "ok.tar.gz", 64)), str(deep_tmp_path / "ok")).folders == 64


def test_a_source_folder_deeper_than_the_limit_is_refused_without_recursing(deep_tmp_path: Path) -> None:
    src = deep_tmp_path / "src"
    make_deep(src, 1500)
    error = refused(src, deep_tmp_path)
    assert error.member == "/".join(["d"] * 65)


def test_remove_tree_removes_a_tree_too_deep_for_rmtree_and_never_follows_links(deep_tmp_path: Path) -> None:
    from ongrid_plugins.packs.archive import remove_tree

    kept = deep_tmp_path / "kept"
    kept.mkdir()
    (kept / "file").write_text("x")
    deep = deep_tmp_path / "deep"
    make_deep(deep, 1500)
    (deep / "link").symlink_to(kept)
    assert remove_tree(str(deep)) is True
    assert not deep.exists() and (kept / "file").read_text() == "x"
    assert remove_tree(str(deep_tmp_path / "never-there")) is True


def test_names_and_link_targets_that_are_not_utf8_are_refused(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a\udcff.txt").write_text("x")  # the file name's bytes are b"a\xff.txt"
    assert "is not valid UTF-8" in refused(src, tmp_path).reason
    link = tar_member("greet/alias", tarfile.SYMTYPE, linkname="run\udcff.sh")
    assert "target is not valid UTF-8" in refused(good_tar(tmp_path / "l.tar.gz", link), tmp_path).reason


def test_a_zip_with_too_many_members_is_refused_from_its_end_record_before_its_directory_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ZipFile() parsed the whole central directory first: 1,000,000 members took 600 MB and 7 s."""
    source = tmp_path / "many.zip"
    with zipfile.ZipFile(source, "w") as zf:
        for i in range(50):
            zf.writestr(str(i), b"")

    def parse(*_args: object, **_kw: object) -> None:
        raise AssertionError("the central directory was parsed")

    monkeypatch.setattr(zipfile, "ZipFile", parse)
    with pytest.raises(UnsafeArchive, match="has 50 members; the limit is 10"):
        unpack(str(source), str(tmp_path / "out"), Limits(max_members=10))


def test_a_zip_whose_end_record_understates_its_members_is_counted_before_its_directory_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review: zipfile parses the directory by its size in bytes, not by the declared
    count: an end record declaring 1 member over 1.7 million entries took 659 MB and 9 s."""
    source = tmp_path / "liar.zip"
    with zipfile.ZipFile(source, "w") as zf:
        for i in range(50):
            zf.writestr(str(i), b"")
    data = bytearray(source.read_bytes())
    at = data.rfind(b"PK\x05\x06")
    data[at + 8 : at + 12] = (1).to_bytes(2, "little") * 2  # "one member", on this disk and in all
    source.write_bytes(bytes(data))

    def parse(*_args: object, **_kw: object) -> None:
        raise AssertionError("the central directory was parsed")

    monkeypatch.setattr(zipfile, "ZipFile", parse)
    with pytest.raises(UnsafeArchive, match="has more than 10 members in its central directory"):
        unpack(str(source), str(tmp_path / "out"), Limits(max_members=10))


def test_an_oversized_tar_extended_header_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A 250 MB PAX header in a 255 KB .tar.gz took ~950 MB: tarfile holds it whole, several times."""
    info = tarfile.TarInfo("a.txt")
    info.size = 1
    info.pax_headers = {"comment": "x" * (2 * 1024 * 1024)}
    source = tmp_path / "pax.tar.gz"
    with tarfile.open(source, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        tf.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(UnsafeArchive, match=r"an extended header of \d+ bytes; the limit is 1048576"):
        unpack(str(source), str(tmp_path / "out"))


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_bytecode_caches_and_version_control_in_an_archive_are_left_out_as_from_a_folder(
    tmp_path: Path, kind: str
) -> None:
    """Found in review: an archive's __pycache__/helper.cpython-311.pyc (unchecked-hash,
    compiled from other code) was installed, left out of the lock, and ran."""
    members = {
        "p/greet/helper.py": b"SAID = 'hello'\n",
        "p/greet/__pycache__/helper.cpython-311.pyc": b"\x00evil bytecode",
        "p/.git/hooks/post-checkout": b"#!/bin/sh\n",
    }
    source = tmp_path / f"p.{'tar.gz' if kind == 'tar' else 'zip'}"
    if kind == "tar":
        with tarfile.open(source, "w:gz") as tf:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    else:
        with zipfile.ZipFile(source, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
    out = tmp_path / "out"
    unpack(str(source), str(out))
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["p/greet/helper.py"]
