"""The embedded default's file broker (`simrun_site.file_broker`) with real kombu and files."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection

from simrun_site.file_broker import clean_control, clean_staging

TRANSPORT = "simrun_site.file_broker:Transport"
# kombu keeps the declared queues of a file-system transport in one state per process: each
# test uses a queue of its own


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[Connection]:
    for sub in ("in", "control"):
        (tmp_path / sub).mkdir()
    options = {
        "data_folder_in": str(tmp_path / "in"),
        "data_folder_out": str(tmp_path / "in"),
        "control_folder": str(tmp_path / "control"),
        "store_processed": False,
    }
    with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as conn:
        yield conn


def test_a_message_is_published_whole_by_rename(connection: Connection, tmp_path: Path) -> None:
    queue = connection.SimpleQueue("q")
    queue.put({"n": 1})

    (published,) = (tmp_path / "in").glob("*.q.msg")
    assert published.stat().st_size > 0
    assert not list((tmp_path / "staging").iterdir())  # written there, renamed away
    assert queue.get(timeout=5).payload == {"n": 1}
    assert not list((tmp_path / "in").glob("*.msg"))
    assert not list((tmp_path / "claimed").iterdir())
    queue.close()


def test_unreadable_messages_are_set_aside_once_and_the_next_one_is_read(
    connection: Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    queue = connection.SimpleQueue("r")
    # names that sort before any the transport makes (milliseconds of the monotonic clock,
    # never starting with 0), so they are met before the good message whatever the uptime
    (tmp_path / "in" / "0_1_empty.r.msg").write_bytes(b"")
    (tmp_path / "in" / "0_2_garbage.r.msg").write_bytes(b"{not json")
    (tmp_path / "in" / "0_3_json.r.msg").write_bytes(b'{"not": "a kombu message"}')
    queue.put({"n": 2})

    with caplog.at_level(logging.ERROR, logger="simrun.broker"):
        assert queue.get(timeout=5).payload == {"n": 2}

    bad = sorted(p.name for p in (tmp_path / "bad").iterdir())
    assert bad == ["0_1_empty.r.msg", "0_2_garbage.r.msg", "0_3_json.r.msg"]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3
    assert all("an unreadable message was set aside in" in line for line in said)
    queue.close()


def test_entries_that_are_no_regular_file_are_set_aside_without_being_opened(
    connection: Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO (opening it would wait for a writer for ever), a directory and a link named like
    messages: each is moved to bad/ unopened, and the good message after them is read."""
    queue = connection.SimpleQueue("f")
    os.mkfifo(tmp_path / "in" / "0_1_fifo.f.msg")
    (tmp_path / "in" / "0_2_dir.f.msg").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "in" / "0_3_link.f.msg")
    queue.put({"n": 3})

    with caplog.at_level(logging.ERROR, logger="simrun.broker"):
        assert queue.get(timeout=5).payload == {"n": 3}

    bad = sorted(p.name for p in (tmp_path / "bad").iterdir())
    assert bad == ["0_1_fifo.f.msg", "0_2_dir.f.msg", "0_3_link.f.msg"]
    assert stat.S_ISFIFO((tmp_path / "bad" / "0_1_fifo.f.msg").lstat().st_mode)
    assert len(caplog.records) == 3
    queue.close()


def test_staging_is_cleaned_of_what_producers_left_but_not_of_what_they_write(
    tmp_path: Path,
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    left, writing = staging / "left.q.msg", staging / "writing.q.msg"
    left.write_bytes(b"")
    writing.write_bytes(b"{")
    an_hour_ago = time.time() - 3600
    os.utime(left, (an_hour_ago, an_hour_ago))

    assert clean_staging(staging, older_than_s=60) == ["left.q.msg"]
    assert [p.name for p in staging.iterdir()] == ["writing.q.msg"]


def test_the_control_folder_is_cleaned_of_half_written_tables_but_keeps_its_tables(
    tmp_path: Path,
) -> None:
    """A producer killed while it rewrote an exchange table leaves the hidden copy it was to
    rename over the table; the next start removes old ones, never a table, a lock or a copy
    still being written."""
    control = tmp_path / "control"
    control.mkdir()
    left = control / ".celery.pidbox.exchange.0b5e5c1e-6a55-4d8e-9f5c-8d1b0b7a2e11"
    writing = control / ".simrun.exchange.9a1f6b43-2c55-4f0e-8a11-5e0c7a6d4b22"
    kept = [control / "simrun.exchange", control / "simrun.exchange.lock"]
    for path in (left, writing, *kept):
        path.write_bytes(b"[]")
    an_hour_ago = time.time() - 3600
    for path in (left, *kept):
        os.utime(path, (an_hour_ago, an_hour_ago))

    assert clean_control(control, older_than_s=60) == [left.name]
    assert sorted(p.name for p in control.iterdir()) == sorted(p.name for p in (writing, *kept))


def test_serve_cleans_both_folders_before_it_starts_the_services(
    tmp_path: Path, settings: Any
) -> None:
    """What `simrun serve` runs before the services start: the staging and control
    folders of the configured broker lose what killed producers left there, the doorbell
    folder the doorbells of consumers that died."""
    from runs.cli.service_commands import clean_broker

    staging, control, doorbell = tmp_path / "staging", tmp_path / "control", tmp_path / "doorbell"
    left = [
        staging / "left.q.msg",
        control / ".simrun.exchange.0b5e5c1e-6a55-4d8e-9f5c-8d1b0b7a2e11",
        doorbell / "123.0b5e5c1e6a55.fifo",
    ]
    for path in left:
        path.parent.mkdir()
        if path.parent == doorbell:
            os.mkfifo(path)
        else:
            path.write_bytes(b"")
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
        "staging_folder": str(staging),
        "control_folder": str(control),
        "doorbell_folder": str(doorbell),
    }

    clean_broker()

    assert [path.exists() for path in left] == [False, False, False]
