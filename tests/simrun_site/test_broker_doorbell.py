"""The file broker's doorbells (`simrun_site.broker_doorbell`) with real kombu, FIFOs and
processes: a waiting consumer is rung by the publisher instead of looking every so often."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection, Consumer, Exchange, Queue

from simrun_site.broker_doorbell import Doorbell, clean_doorbells
from tests.waiting import DEADLINE_S, wait_for

TRANSPORT = "simrun_site.file_broker:Transport"
ROOT = Path(__file__).resolve().parents[2]
# kombu keeps the declared queues of a file-system transport in one state per process: each
# test uses a queue of its own


@pytest.fixture
def options(tmp_path: Path) -> dict[str, Any]:
    for sub in ("in", "control"):
        (tmp_path / sub).mkdir()
    return {
        "data_folder_in": str(tmp_path / "in"),
        "data_folder_out": str(tmp_path / "in"),
        "control_folder": str(tmp_path / "control"),
        "store_processed": False,
        # far past the test's deadline: only a ring can bring a message in time
        "doorbell_fallback_s": 600.0,
        "polling_interval": 0.05,
    }


@pytest.fixture
def connection(options: dict[str, Any]) -> Iterator[Connection]:
    with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as conn:
        yield conn


def _waiting_on_its_doorbell(thread: threading.Thread) -> bool:
    """Whether `thread` is in a doorbell's wait (so it looked at the queue already)."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code is Doorbell.wait.__code__:
            return True
        frame = frame.f_back
    return False


def test_a_waiting_consumer_gets_a_message_as_soon_as_another_connection_publishes_it(
    connection: Connection, options: dict[str, Any], tmp_path: Path
) -> None:
    """The consumer looked, found nothing and waits (its fallback is ten minutes): the
    publisher's ring brings it the message long before the test's deadline."""
    got: list[Any] = []

    def consume() -> None:
        with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as c:
            queue = c.SimpleQueue("rung")
            got.append(queue.get(timeout=600).payload)  # only a look can end it in time
            queue.close()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    wait_for(lambda: _waiting_on_its_doorbell(consumer), what="the consumer waiting")
    (doorbell,) = (tmp_path / "doorbell").glob("*.fifo")
    assert doorbell.name.startswith(f"{os.getpid()}.")

    connection.SimpleQueue("rung").put({"n": 1})

    assert wait_for(lambda: got, what="the message at the consumer") == [{"n": 1}]
    consumer.join(timeout=DEADLINE_S)
    assert not doorbell.exists()  # the consumer's connection closed: its doorbell went with it


CONSUMER = """
import json, sys
from kombu import Connection
options = json.loads(sys.argv[1])
with Connection("filesystem://", transport="simrun_site.file_broker:Transport",
                transport_options=options) as conn:
    conn.SimpleQueue("orphan").get(timeout=600)
"""


def test_the_doorbell_of_a_consumer_that_died_is_removed_by_the_next_publish(
    connection: Connection, options: dict[str, Any], tmp_path: Path
) -> None:
    consumer = subprocess.Popen([sys.executable, "-c", CONSUMER, json.dumps(options)], cwd=ROOT)
    try:
        (doorbell,) = wait_for(
            lambda: list((tmp_path / "doorbell").glob(f"{consumer.pid}.*.fifo")),
            what="the consumer's doorbell",
        )
    finally:
        consumer.send_signal(signal.SIGKILL)
        consumer.wait(timeout=DEADLINE_S)
    assert stat.S_ISFIFO(doorbell.lstat().st_mode)  # left behind by the kill

    queue = connection.SimpleQueue("orphan")
    queue.put({"n": 2})

    assert not doorbell.exists()
    assert queue.get(timeout=DEADLINE_S).payload == {"n": 2}
    queue.close()


def test_a_file_or_a_link_named_like_a_doorbell_is_neither_written_nor_followed(
    connection: Connection, tmp_path: Path
) -> None:
    """A regular file, a directory and a link to a FIFO someone reads, named like doorbells:
    the publish goes through, writes none of them and nothing through the link."""
    doorbells = tmp_path / "doorbell"
    doorbells.mkdir()
    plain, folder, link = (doorbells / f"1.{kind}.fifo" for kind in ("file", "dir", "link"))
    plain.write_bytes(b"")
    folder.mkdir()
    target = tmp_path / "elsewhere.fifo"
    os.mkfifo(target)
    reader = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    os.symlink(target, link)
    published: list[bool] = []

    def publish() -> None:
        connection.SimpleQueue("odd").put({"n": 3})
        published.append(True)

    try:
        publisher = threading.Thread(target=publish, daemon=True)
        publisher.start()
        publisher.join(timeout=DEADLINE_S)

        assert published == [True]
        assert plain.read_bytes() == b""
        assert folder.is_dir() and link.is_symlink()
        assert os.read(reader, 1) == b""  # nothing came through the link (no writer left)
    finally:
        os.close(reader)
    assert list((tmp_path / "in").glob("*.odd.msg"))


def test_a_consumer_whose_prefetch_is_full_takes_the_next_message_once_it_acks(
    connection: Connection, options: dict[str, Any]
) -> None:
    """An ack rings no doorbell: a consumer that could take no message looks again every
    `polling_interval`, so the message waiting behind a running task is not left waiting."""
    exchange = Exchange("held", type="direct")
    queue = Queue("held", exchange, routing_key="held")
    producer = connection.Producer()
    for n in (1, 2):
        producer.publish({"n": n}, exchange=exchange, routing_key="held", declare=[queue])
    got: list[Any] = []

    def consume() -> None:
        with (
            Connection("filesystem://", transport=TRANSPORT, transport_options=options) as c,
            Consumer(c, [queue], callbacks=[lambda _body, m: got.append(m)]) as consumer,
        ):
            consumer.qos(prefetch_count=1)
            while len(got) < 2:
                c.drain_events(timeout=600)  # a wait that only a look can end in time

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    first = wait_for(lambda: got[:1], what="the first message")[0]
    assert len(got) == 1  # the prefetch of one holds the second back
    first.ack()
    wait_for(lambda: len(got) == 2, what="the second message after the ack")
    # two messages of the same millisecond may be taken in either order
    assert sorted(m.payload["n"] for m in got) == [1, 2]
    got[1].ack()
    thread.join(timeout=DEADLINE_S)


def test_doorbells_nobody_listens_to_are_cleaned_but_not_live_or_young_ones(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "doorbell"
    live = Doorbell(folder)
    dead, young, plain = folder / "1.dead.fifo", folder / "2.young.fifo", folder / "3.file.fifo"
    os.mkfifo(dead)
    os.mkfifo(young)
    plain.write_bytes(b"")
    an_hour_ago = time.time() - 3600
    for path in (live.path, dead, plain):
        os.utime(path, (an_hour_ago, an_hour_ago))

    try:
        assert clean_doorbells(folder, older_than_s=60) == [dead.name]
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            p.name for p in (live.path, young, plain)
        )
    finally:
        live.close()
