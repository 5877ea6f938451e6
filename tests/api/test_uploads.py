"""Archives of sources: every malicious one is refused and leaves nothing; good ones are stored
once by content."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from runs.services.archive_checks import tar_member_count
from runs.services.uploads import (
    UnsupportedArchive,
    UploadLimits,
    UploadRefused,
    UploadTooLarge,
    archive_kind,
    spool,
    store_archive,
    store_upload,
)
from runs.snapshots import SnapshotRefused, snapshot_directory, snapshot_entries, store_blob
from simrun_harness.layout import StorePaths
from tests.api.archives import sparse_tar, tar_files, tar_member, tar_of, zip_of

LIMITS = UploadLimits(max_bytes=10 * 1024**2, max_files=5, max_unpacked_bytes=8 * 1024**2)
ZEROS = bytes(5 * 1024**2)


def files_below(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


@pytest.fixture
def paths(tmp_path: Path) -> StorePaths:
    return StorePaths(tmp_path / "store")


def upload(paths: StorePaths, body: bytes, content_type: str = "application/x-tar") -> object:
    return store_upload(paths, io.BytesIO(body), content_type=content_type, limits=LIMITS)


MALICIOUS = {
    "absolute path": (tar_files({"/etc/passwd": b"x"}), "absolute paths are not allowed"),
    "dot-dot": (tar_files({"ok.txt": b"1", "../escape.txt": b"x"}), "'..' would leave"),
    "link outside": (
        tar_of([tar_member("a.txt", b"1"), tar_member("l", kind=tarfile.SYMTYPE, link="../../x")]),
        "a link pointing outside the archive",
    ),
    "absolute link": (
        tar_of([tar_member("a.txt", b"1"), tar_member("l", kind=tarfile.SYMTYPE, link="/etc")]),
        "a link pointing outside the archive",
    ),
    "hard link": (
        tar_of([tar_member("a.txt", b"1"), tar_member("h", kind=tarfile.LNKTYPE, link="a.txt")]),
        "hard links are not allowed",
    ),
    "device": (tar_of([tar_member("dev", kind=tarfile.CHRTYPE)]), "devices and fifos"),
    "fifo": (tar_of([tar_member("pipe", kind=tarfile.FIFOTYPE)]), "devices and fifos"),
    "too many files": (tar_files({f"f{i}": b"x" for i in range(6)}), "more than 5 files"),
    "too many bytes": (
        tar_files({"a": bytes(5 * 1024**2), "b": bytes(4 * 1024**2)}),
        "unpacks to more than 8388608 bytes",
    ),
    "gzip bomb": (tar_files({"zeros": ZEROS}, gz=True), "decompression bomb"),
    "zip bomb": (zip_of({"zeros": ZEROS}), "decompression bomb"),
    "zip dot-dot": (zip_of({"../x": b"x"}), "'..' would leave"),
    "zip link outside": (zip_of({"a": b"1"}, links={"l": "../../etc/passwd"}), "outside"),
    "link to a directory": (
        tar_of([tar_member("d/a", b"1"), tar_member("l", kind=tarfile.SYMTYPE, link="d")]),
        "links to directories are not supported",
    ),
    "twice the same name": (
        tar_of([tar_member("a", b"1"), tar_member("a", b"2")]),
        "appears twice",
    ),
    "not an archive": (b"hello, I am not a tar file" * 40, "not a readable tar archive"),
    "nothing in it": (tar_of([]), "holds no file"),
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_a_malicious_archive_is_refused_and_leaves_nothing(paths: StorePaths, case: str) -> None:
    """S15: refused with a clear error before extraction; no blob, snapshot or spool file."""
    body, message = MALICIOUS[case]
    kind = "application/zip" if case.startswith("zip") else "application/x-tar"
    if case == "gzip bomb":
        kind = "application/gzip"
    with pytest.raises(UploadRefused, match=message.replace("(", r"\(").replace(".", r"\.")):
        upload(paths, body, kind)
    assert files_below(paths.root) == []


def test_a_corrupt_member_found_while_storing_leaves_no_blob(paths: StorePaths) -> None:
    """S15: a member whose data is broken (seen only when read) removes what was stored."""
    body = bytearray(zip_of({"a.txt": b"first file " * 100, "b.txt": b"second file " * 100}))
    second = body.find(b"b.txt") + len("b.txt") + 5  # inside b.txt's compressed data
    body[second] ^= 0xFF
    with pytest.raises(UploadRefused):
        upload(paths, bytes(body), "application/zip")
    assert files_below(paths.root) == []


def test_an_archive_becomes_a_snapshot_whose_equal_files_are_one_blob(paths: StorePaths) -> None:
    """S15: files deduplicated by content with hard links; a link inside is its target's file."""
    body = tar_of(
        [
            tar_member("model/a.txt", b"same"),
            tar_member("model/b.txt", b"same"),
            tar_member("model/c.txt", b"other"),
            tar_member("model/link", kind=tarfile.SYMTYPE, link="c.txt"),
        ],
        gz=True,
    )
    stored = upload(paths, body, "application/gzip")
    folder = paths.snapshot(stored.digest)  # type: ignore[attr-defined]
    assert (folder / "model/link").read_bytes() == b"other"
    assert os.stat(folder / "model/a.txt").st_ino == os.stat(folder / "model/b.txt").st_ino
    assert len(list(paths.blobs.rglob("*/*"))) == 2
    assert files_below(paths.uploads) == []
    assert (stored.files, stored.bytes) == (4, 4 + 4 + 5 + 5)  # type: ignore[attr-defined]


def executable(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IXUSR)


def test_an_uploaded_script_stays_executable(paths: StorePaths) -> None:
    """S15: the owner's execute bit of a member is kept, so `./run.sh` of a model runs in the
    pods; a link to an executable file is executable too."""
    body = tar_of(
        [
            tar_member("model/run.sh", b"#!/bin/sh\necho ok\n", mode=0o755),
            tar_member("model/notes.txt", b"#!/bin/sh\necho ok\n"),
            tar_member("model/go", kind=tarfile.SYMTYPE, link="run.sh"),
        ]
    )
    folder = paths.snapshot(upload(paths, body).digest)  # type: ignore[attr-defined]
    assert executable(folder / "model/run.sh")
    assert executable(folder / "model/go")
    assert not executable(folder / "model/notes.txt")
    run = subprocess.run([folder / "model/run.sh"], capture_output=True, text=True, check=True)
    assert run.stdout == "ok\n"


def test_a_zip_keeps_the_execute_bit_of_its_members(paths: StorePaths) -> None:
    body = zip_of({"run.sh": b"#!/bin/sh\n", "data.csv": b"a\n"}, executable=["run.sh"])
    folder = paths.snapshot(upload(paths, body, "application/zip").digest)  # type: ignore[attr-defined]
    assert executable(folder / "run.sh")
    assert not executable(folder / "data.csv")


def test_an_upload_and_a_local_snapshot_of_the_same_directory_are_the_same_snapshot(
    paths: StorePaths, tmp_path: Path
) -> None:
    """The digest covers content and execute bits; an upload keeps both, so `simrun submit
    --source DIR` gives the same snapshot through the API as on the store itself."""
    source = tmp_path / "model"
    source.mkdir()
    (source / "run.sh").write_bytes(b"#!/bin/sh\n")
    (source / "run.sh").chmod(0o755)
    (source / "model.txt").write_bytes(b"x\n")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(source, arcname=".")
    uploaded = upload(paths, buffer.getvalue(), "application/gzip")
    local = snapshot_directory(paths, source)
    assert uploaded.digest == local.digest  # type: ignore[attr-defined]
    assert executable(paths.snapshot(local.digest) / "run.sh")


def test_the_same_sources_give_the_same_snapshot(paths: StorePaths) -> None:
    body = zip_of({"x.py": b"print(1)\n"})
    assert upload(paths, body, "application/zip") == upload(paths, body, "application/zip")


def test_a_body_beyond_the_limit_is_cut_while_spooled(paths: StorePaths) -> None:
    """S15: uploads are spooled to disk and refused as soon as they pass the limit."""
    with pytest.raises(UploadTooLarge):
        spool(io.BytesIO(bytes(1001)), directory=paths.uploads, limit=1000)
    assert files_below(paths.root) == []
    spooled = spool(io.BytesIO(bytes(1000)), directory=paths.uploads, limit=1000)
    assert spooled.stat().st_size == 1000


def test_only_archives_are_accepted() -> None:
    with pytest.raises(UnsupportedArchive, match="send one of application/gzip"):
        archive_kind("text/plain")
    assert archive_kind("application/zip; charset=binary") == "zip"


def test_a_link_in_a_zip_is_its_targets_file(paths: StorePaths) -> None:
    stored = upload(paths, zip_of({"a/t.txt": b"t"}, links={"a/l": "t.txt"}), "application/zip")
    assert (paths.snapshot(stored.digest) / "a/l").read_bytes() == b"t"  # type: ignore[attr-defined]


def test_store_archive_checks_before_it_extracts(paths: StorePaths, tmp_path: Path) -> None:
    """S15: a refusal of the last member stores nothing of the members before it."""
    archive = tmp_path / "a.tar"
    archive.write_bytes(tar_files({"a.txt": b"aaa", "b.txt": b"bbb", "/abs": b"x"}))
    with pytest.raises(UploadRefused, match="absolute"):
        store_archive(paths, archive, "tar", LIMITS)
    assert files_below(paths.root) == []


def test_an_existing_blob_is_kept_never_replaced_and_no_temporary_file_stays(
    paths: StorePaths,
) -> None:
    """A blob is written to a temporary name and linked to its hash's name only if absent."""
    sha, _ = store_blob(paths, io.BytesIO(b"same content"))
    blob = paths.blob(sha)
    before = blob.stat()
    assert store_blob(paths, io.BytesIO(b"same content"))[0] == sha
    after = blob.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert stat.S_IMODE(after.st_mode) == 0o444
    assert [p.name for p in paths.blobs.rglob(".incoming-*")] == []


def test_a_snapshot_naming_the_manifest_is_refused_and_its_blob_keeps_its_content(
    paths: StorePaths,
) -> None:
    """The manifest was written through the hard link of a member of its name, into the blob
    every snapshot with that content shares."""
    upload(paths, tar_files({"model/model.txt": b"hello"}))
    with pytest.raises(SnapshotRefused, match="reserved for the store's own files"):
        snapshot_entries(paths, [(".simrun-manifest.json", io.BytesIO(b"hello"), False)])
    sha = hashlib.sha256(b"hello").hexdigest()
    assert paths.blob(sha).read_bytes() == b"hello"


@pytest.mark.parametrize("name", [".simrun-manifest.json", "model/.simrun-merged", "a/.simrun-x"])
def test_an_archive_with_a_name_the_store_reserves_is_refused_naming_it(
    paths: StorePaths, name: str
) -> None:
    with pytest.raises(UploadRefused, match=rf"member '{re.escape(name)}'.*reserved"):
        upload(paths, tar_files({"model/ok.txt": b"1", name: b"x"}))
    assert files_below(paths.root) == []


def test_links_count_at_their_targets_size_against_the_ratio(paths: StorePaths) -> None:
    """Each link is stored as a copy of its target: four links to a 1 MiB member of a 2 KB
    zip would write 5 MiB."""
    body = zip_of({"f": bytes(1024**2)}, links={f"l{i}": "f" for i in range(4)})
    assert len(body) < 3000
    with pytest.raises(UploadRefused, match=r"member 'l0'.*decompression bomb"):
        upload(paths, body, "application/zip")
    assert files_below(paths.root) == []


def test_a_local_snapshot_of_a_snapshot_is_the_same_snapshot(paths: StorePaths) -> None:
    """The manifest at a snapshot's top is the store's own file, made anew, not a source."""
    stored = upload(paths, tar_files({"model/m.py": b"x = 1\n"}))
    again = snapshot_directory(paths, paths.snapshot(stored.digest))  # type: ignore[attr-defined]
    assert again.digest == stored.digest  # type: ignore[attr-defined]


def test_a_local_source_with_a_name_the_store_reserves_is_refused(
    paths: StorePaths, tmp_path: Path
) -> None:
    source = tmp_path / "model"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / ".simrun-manifest.json").write_text("hello")
    with pytest.raises(SnapshotRefused, match="reserved for the store's own files"):
        snapshot_directory(paths, source)


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
@pytest.mark.parametrize("gz", [False, True])
def test_a_tars_members_are_counted_from_its_headers_as_tarfile_counts_them(
    tmp_path: Path, fmt: int, gz: bool
) -> None:
    """Files and links count, directories and extension headers (long names, pax) do not."""
    buffer = io.BytesIO()
    long_dir = "d" * 90 + "/" + "e" * 60 if fmt != tarfile.USTAR_FORMAT else "d" * 90
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w", format=fmt) as archive:
        for name, data in [(f"{long_dir}/f{i}", b"x" * (i * 700)) for i in range(5)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if fmt == tarfile.PAX_FORMAT:
                info.pax_headers = {"comment": "c" * 600}
            archive.addfile(info, io.BytesIO(data))
        folder = tarfile.TarInfo("folder")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = f"{long_dir}/f1"
        archive.addfile(link)
    path = tmp_path / "a.tar"
    path.write_bytes(buffer.getvalue())
    kind = "tgz" if gz else "tar"
    assert tar_member_count(path, kind, 100) == 6
    assert tar_member_count(path, kind, 3) == 4  # counting stops after the limit


def test_a_sparse_members_extension_blocks_are_no_members(tmp_path: Path) -> None:
    path = tmp_path / "sparse.tar"
    path.write_bytes(sparse_tar(1024**3))
    assert tar_member_count(path, "tar", 10) == 1


def members_then_corrupt_data(kind: str, members: int) -> bytes:
    """An archive whose first `members` members are whole and valid, followed by data no
    reader can take: a tar's headers and then garbage (no end-of-archive blocks); the same
    tar gzipped, then bytes that are no gzip member; a zip whose central directory holds
    one more entry after them, its signature broken."""
    garbage = b"\xffnot an archive member\xff" * 64
    if kind == "zip":
        body = bytearray(zip_of({f"f{i}": f"{i}".encode() for i in range(members + 1)}))
        last = body.rfind(b"PK\x01\x02")
        body[last : last + 4] = b"PK\x01\x09"
        return bytes(body)
    tar = b"".join(
        info.tobuf(format=tarfile.GNU_FORMAT) + data + bytes(-len(data) % 512)
        for info, data in (tar_member(f"f{i}", f"{i}".encode()) for i in range(members))
    )
    return gzip.compress(tar) + garbage if kind == "tgz" else tar + garbage


@pytest.mark.parametrize("kind", ["tar", "tgz", "zip"])
def test_an_archive_is_read_no_further_than_the_member_over_the_limit(
    paths: StorePaths, kind: str
) -> None:
    """The limit's one more member is the last thing read: what follows it, unreadable, is
    never reached, so the refusal names the limit, not a broken archive. Under the limit
    the same corrupt data is reached and refused as such (but for a plain tar: tarfile takes
    a bad header after the first as the archive's end)."""
    body = members_then_corrupt_data(kind, LIMITS.max_files + 1)
    media = {"tar": "application/x-tar", "tgz": "application/gzip", "zip": "application/zip"}
    if kind != "tar":
        with pytest.raises(UploadRefused, match=f"not a readable {kind} archive"):
            upload(paths, members_then_corrupt_data(kind, LIMITS.max_files - 1), media[kind])

    with pytest.raises(UploadRefused) as refused:
        upload(paths, body, media[kind])

    assert str(refused.value) == "the archive has more than 5 files (SIMRUN_UPLOAD_MAX_FILES)"
    assert files_below(paths.root) == []
