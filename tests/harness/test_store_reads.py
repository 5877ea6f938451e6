"""Reads below the run store never follow a link: with openat2 and with its fallback alike."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from simrun_harness import store_reads, store_walks
from simrun_harness.store_reads import NotInStore, TooLarge
from simrun_harness.store_walks import WalkLimits


@pytest.fixture(params=["openat2", "components"])
def resolver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test twice: through openat2 (the kernel's), then component by component."""
    kept = store_reads.openat2.works
    if request.param == "components":
        store_reads.openat2.works = False
    else:
        (tmp_path / "probe").mkdir()
        os.close(store_reads.open_dir(tmp_path, "probe"))
        if not store_reads.openat2.works:
            pytest.skip("this kernel has no openat2: the fallback is tested alone")
    yield request.param
    store_reads.openat2.works = kept


@pytest.fixture
def store(tmp_path: Path, resolver: str) -> Path:
    """A store whose run `r` has an output file, and a secret beside the store."""
    root = tmp_path / "store"
    out = root / "runs" / "r" / "tasks" / "t" / "out"
    out.mkdir(parents=True)
    (out / "data.txt").write_text("mine\n")
    (tmp_path / "secret").write_text("the key\n")
    return root


def test_a_regular_file_below_the_root_is_read(store: Path) -> None:
    assert store_reads.read_bytes(store, "runs/r/tasks/t/out/data.txt", limit=100) == b"mine\n"
    absolute = store / "runs/r/tasks/t/out/data.txt"
    assert store_reads.read_bytes(store, absolute, limit=100) == b"mine\n"


def test_a_link_as_the_last_component_reads_as_absent(store: Path, tmp_path: Path) -> None:
    (store / "runs/r/tasks/t/out/key").symlink_to(tmp_path / "secret")
    with pytest.raises(NotInStore):
        store_reads.read_bytes(store, "runs/r/tasks/t/out/key", limit=100)


def test_a_directory_replaced_by_a_link_to_the_root_of_the_machine_reads_as_absent(
    store: Path,
) -> None:
    """The attack of a `command` task: `rm -rf out && ln -s / out`."""
    out = store / "runs/r/tasks/t/out"
    (out / "data.txt").unlink()
    out.rmdir()
    out.symlink_to("/")
    with pytest.raises(NotInStore):
        store_reads.open_file(store, "runs/r/tasks/t/out/etc/passwd")
    assert store_walks.walk_files(store, "runs/r/tasks/t/out", WalkLimits()).files == []
    with pytest.raises(NotInStore):
        store_reads.names(store, "runs/r/tasks/t/out")
    assert store_reads.kind(store, "runs/r/tasks/t/out") is None


def test_a_link_that_stays_inside_the_store_is_not_followed_either(store: Path) -> None:
    (store / "runs/r/tasks/t/out/again.txt").symlink_to("data.txt")
    (store / "runs/r/tasks/t/alias").symlink_to("out")
    with pytest.raises(NotInStore):
        store_reads.read_bytes(store, "runs/r/tasks/t/out/again.txt", limit=100)
    with pytest.raises(NotInStore):
        store_reads.read_bytes(store, "runs/r/tasks/t/alias/data.txt", limit=100)


def test_a_fifo_reads_as_absent_without_waiting_for_a_writer(store: Path) -> None:
    os.mkfifo(store / "runs/r/tasks/t/out/pipe")
    with pytest.raises(NotInStore):
        store_reads.open_file(store, "runs/r/tasks/t/out/pipe")
    with pytest.raises(NotInStore):
        store_reads.names(store, "runs/r/tasks/t/out/pipe")


def test_a_socket_reads_as_absent(store: Path) -> None:
    path = store / "runs/r/tasks/t/out/sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(NotInStore):
            store_reads.open_file(store, "runs/r/tasks/t/out/sock")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device needs root")
def test_a_device_reads_as_absent(store: Path) -> None:
    path = store / "runs/r/tasks/t/out/null"
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(NotInStore):
        store_reads.open_file(store, "runs/r/tasks/t/out/null")


@pytest.mark.parametrize("path", ["runs/r/../../secret", "../secret", "/etc/passwd"])
def test_a_path_leaving_the_root_reads_as_absent(store: Path, path: str) -> None:
    with pytest.raises(NotInStore):
        store_reads.open_file(store, path)


def test_a_file_over_the_limit_is_refused_after_reading_one_byte_more(store: Path) -> None:
    (store / "runs/r/big").write_bytes(b"x" * 101)
    with pytest.raises(TooLarge):
        store_reads.read_bytes(store, "runs/r/big", limit=100)


def test_a_walk_lists_regular_files_sorted_and_never_enters_a_link(
    store: Path, tmp_path: Path
) -> None:
    out = store / "runs/r/tasks/t/out"
    (out / "b" / "c").mkdir(parents=True)
    (out / "b" / "c" / "deep.txt").write_text("d")
    (out / "a.txt").write_text("a")
    (out / "root").symlink_to("/")
    (out / "key").symlink_to(tmp_path / "secret")
    os.mkfifo(out / "pipe")
    walk = store_walks.walk_files(store, "runs/r/tasks/t/out", WalkLimits())
    assert [f.path for f in walk.files] == ["a.txt", "b/c/deep.txt", "data.txt"]
    assert walk.cut is None


@pytest.mark.parametrize(
    ("limits", "kept", "cut"),
    [
        (WalkLimits(depth=2), ["a0", "a1", "a2", "a3", "data.txt", "deep/x"], "depth"),
        (WalkLimits(files=2), ["a0", "a1"], "files"),
        (WalkLimits(seconds=-1.0), [], "time"),
    ],
)
def test_a_walk_stops_at_its_limits_and_says_which(
    store: Path, limits: WalkLimits, kept: list[str], cut: str
) -> None:
    out = store / "runs/r/tasks/t/out"
    for i in range(4):
        (out / f"a{i}").write_text("x")
    (out / "deep" / "er").mkdir(parents=True)
    (out / "deep" / "x").write_text("x")
    (out / "deep" / "er" / "y").write_text("y")
    walk = store_walks.walk_files(store, "runs/r/tasks/t/out", limits)
    assert ([f.path for f in walk.files], walk.cut) == (kept, cut)


def test_a_walk_out_of_entries_keeps_the_files_it_read_and_says_so(store: Path) -> None:
    """A directory of more entries than the limit: what was read of it is listed."""
    out = store / "runs/r/tasks/t/out"
    (out / "many").mkdir()
    for i in range(10):
        (out / "many" / f"f{i}").write_text("x")
    walk = store_walks.walk_files(store, "runs/r/tasks/t/out", WalkLimits(entries=5))
    assert walk.cut == "entries"
    assert walk.files[0].path == "data.txt"
    assert len(walk.files) == 4 and all(f.path.startswith("many/f") for f in walk.files[1:])


def _units(folder: Path, count: int) -> None:
    for index in range(count):
        (folder / f"u{index:06d}").touch()


def test_a_directory_unchanged_for_a_while_is_counted_once_and_its_count_kept(
    store: Path,
) -> None:
    """A finished task's done units are counted once per process: the count of a directory
    whose time says it has not changed for `COUNT_STABLE_S` is kept while that time stays."""
    done = store / "runs" / "r" / "tasks" / "t" / "ledger-done"
    done.mkdir()
    _units(done, 3)
    settled = done.stat().st_mtime_ns - int(10e9)
    os.utime(done, ns=(settled, settled))
    assert store_reads.count(store, "runs/r/tasks/t/ledger-done") == 3
    (done / "u000003").touch()  # a change the directory's time does not show
    os.utime(done, ns=(settled, settled))
    assert store_reads.count(store, "runs/r/tasks/t/ledger-done") == 3
    (done / "u000004").touch()  # a change that moves it
    assert store_reads.count(store, "runs/r/tasks/t/ledger-done") == 5


def test_a_directory_changed_just_now_is_counted_at_every_call(store: Path) -> None:
    """A change within the clock's granularity would not move a directory's time: one changed
    less than `COUNT_STABLE_S` ago is never taken from what was counted before."""
    done = store / "runs" / "r" / "tasks" / "t" / "ledger-done"
    done.mkdir()
    _units(done, 3)
    recent = done.stat().st_mtime_ns
    assert store_reads.count(store, "runs/r/tasks/t/ledger-done") == 3
    (done / "u000003").touch()
    os.utime(done, ns=(recent, recent))
    assert store_reads.count(store, "runs/r/tasks/t/ledger-done") == 4
