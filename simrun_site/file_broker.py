"""The embedded default's Celery broker: kombu's file-system transport, made safe to run unattended.

kombu's own transport (5.x) has two holes that took the worker down (celery/kombu#1551):

- a producer creates the message file and only then writes it, so a consumer listing the
  folder in between reads an empty file, and `json.loads` of it raised out of the consumer
  loop: Celery calls that unrecoverable and the worker exits;
- any file the consumer cannot read as a message (empty, garbage, a half-copied file) has the
  same effect, every time the worker starts again, until someone deletes it by hand.

This subclass changes these things and nothing else:

- **publishing is atomic**: the message is written complete under `staging/`, then renamed
  into the queue folder (same file system, so the rename is atomic): a consumer sees a whole
  message or none;
- **claiming is atomic**: a consumer renames the file into `claimed/` (kombu moved it to the
  system temporary folder, a copy and a delete when that is another file system, which two
  consumers can both win); exactly one rename succeeds;
- **a message that cannot be read is set aside**: logged once as an error and moved to `bad/`,
  and the consumer goes on with the next file;
- the exchange tables in the control folder are replaced by rename too (kombu rewrote them in
  place, so a publisher could read a truncated table while a worker started);
- anything in the queue folder that is not a regular file (a FIFO, a device, a link, a
  directory) is set aside the same way without being opened: reading a FIFO would wait for a
  writer for ever, and with it the worker;
- a message or an exchange table that cannot be written whole (the disk is full) is removed
  (from `staging/`, from the control folder), and `clean_staging` and `clean_control` remove
  what producers killed half way left there (`simrun serve` calls them when it starts).
- **a consumer waits on a doorbell instead of polling** (`simrun_site/broker_doorbell.py`):
  kombu looks at the queue folder every `polling_interval` (0.1 s here, for a submission to
  start at once: 600 listings a minute of an idle worker). A connection that drains makes a
  FIFO of its own in `doorbell/` and, between empty looks, waits on it; every publish (fanout
  included) rings every doorbell once its message is in the queue folder. A ring that comes
  between a look and the wait stays in the pipe, so no message waits; the wait still ends after
  `doorbell_fallback_s` (2 s) for a message nobody rang for. `polling_interval` stays the wait
  when no doorbell could be made, and while every prefetched task is still running (an ack
  rings nobody). A doorbell whose consumer died is removed by the next publish (no reader),
  and by `clean_doorbells` when `simrun serve` starts.

A message is deleted once it is handed to the worker, as kombu does: a worker killed with
SIGKILL loses the message it held. simrun copes with that above the broker: a submission whose
worker died is resumed by the controller (C17), and `reconcile` is sent again by beat.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import filesystem
from kombu.utils.json import dumps, loads

from simrun_site.broker_doorbell import Doorbell, ring_all

log = logging.getLogger("simrun.broker")


class Channel(filesystem.Channel):
    """kombu's file-system channel with atomic publishing and claiming, and bad files set aside."""

    def _folder(self, option: str, default: str) -> Path:
        """A folder beside the queue folder (so renames between them are atomic)."""
        configured = self.transport_options.get(option)
        folder = Path(configured) if configured else Path(self.data_folder_in).parent / default
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def staging_folder(self) -> Path:
        return self._folder("staging_folder", "staging")

    @property
    def claimed_folder(self) -> Path:
        return self._folder("claimed_folder", "claimed")

    @property
    def bad_folder(self) -> Path:
        return self._folder("bad_folder", "bad")

    @property
    def doorbell_folder(self) -> Path:
        return doorbell_folder(self.transport_options)

    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Write the message whole under staging/, then rename it into the queue folder."""
        # kombu's name: the milliseconds order the queue, the uuid makes it unique
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        staged = self.staging_folder / name
        try:
            staged.write_bytes(dumps(message).encode())
            os.rename(staged, os.path.join(self.data_folder_out, name))
        except BaseException:
            staged.unlink(missing_ok=True)  # a disk that filled up leaves no half message
            raise
        ring_all(self.doorbell_folder)  # the consumers waiting look at once

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        """The oldest readable message of `queue`, claimed by rename; unreadable ones set aside."""
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            claimed = self.claimed_folder / name
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:
                continue  # another consumer claimed it first
            payload = self._read(claimed)
            if payload is not None:
                claimed.unlink()
                return payload
        raise Empty()

    def _read(self, claimed: Path) -> Any:
        """The message in `claimed`, or None after moving the file to bad/ (logged once)."""
        try:
            payload = loads(_regular_file_bytes(claimed).decode())
            self.Message(payload, channel=self)  # what the consumer does next; raises the same
            return payload
        except Exception as exc:  # anything unreadable: empty, garbage, not a kombu message
            bad = self.bad_folder / claimed.name
            os.replace(claimed, bad)
            log.error(
                "broker: an unreadable message was set aside in %s (%s: %s); going on",
                bad,
                type(exc).__name__,
                exc,
            )
            return None

    @contextlib.contextmanager
    def _table_lock(self, exchange: str) -> Iterator[Path]:
        """Serialise read-modify-write of one exchange table between processes."""
        table = self._exchange_file(exchange)
        self.control_folder.mkdir(parents=True, exist_ok=True)
        with open(table.with_name(table.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield table

    def _write_table(self, table: Path, queues: list[Any]) -> None:
        staged = table.with_name(f".{table.name}.{uuid.uuid4()}")
        try:
            staged.write_bytes(dumps(queues).encode())
            os.rename(staged, table)
        except BaseException:
            staged.unlink(missing_ok=True)  # a disk that filled up leaves no half table
            raise

    def _queue_bind(
        self, exchange: str, routing_key: str, pattern: str, queue: str, *args: Any
    ) -> None:
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock(exchange) as table:
            queues = self.get_table(exchange)
            if entry not in queues:
                self._write_table(table, [entry, *queues])

    def _delete(
        self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any
    ) -> None:
        super(filesystem.Channel, self)._delete(
            queue, exchange, routing_key, pattern, *args, **kwargs
        )
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock(exchange) as table:
            queues = self.get_table(exchange)
            if entry in queues:
                self._write_table(table, [q for q in queues if q != entry])


class NotAMessageFile(ValueError):
    """A queue entry that is no regular file (a FIFO, a device, a directory, a link)."""


def _regular_file_bytes(path: Path) -> bytes:
    """The bytes of `path` if it is a regular file; opened without following a link and
    without waiting (a FIFO's open would wait for a writer), then checked."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotAMessageFile(f"not a regular file (mode {stat.filemode(mode)})")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def clean_staging(folder: Path, *, older_than_s: float = 60.0) -> list[str]:
    """Remove what producers left half written in `folder` (the broker's `staging/`): entries
    older than `older_than_s`, which no producer is still writing. The names removed."""
    return _remove_old(folder, older_than_s=older_than_s, match=lambda name: True)


HALF_TABLE = re.compile(r"^\..+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def clean_control(folder: Path, *, older_than_s: float = 60.0) -> list[str]:
    """Remove the exchange tables producers killed half way left in `folder` (the broker's
    control folder): the hidden copies `_write_table` renames over a table, older than
    `older_than_s`. Tables and their locks stay. The names removed."""
    return _remove_old(folder, older_than_s=older_than_s, match=lambda n: bool(HALF_TABLE.match(n)))


def _remove_old(folder: Path, *, older_than_s: float, match: Callable[[str], bool]) -> list[str]:
    """Remove the files of `folder` whose name matches and that are older than `older_than_s`
    (no writer is still at them); directories stay. The names removed."""
    removed = []
    now = time.time()
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            if not match(entry.name):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime > older_than_s:
                    if entry.is_dir(follow_symlinks=False):
                        continue
                    os.unlink(entry.path)
                    removed.append(entry.name)
    return removed


def doorbell_folder(options: dict[str, Any]) -> Path:
    """The consumers' doorbells: the `doorbell_folder` option, else beside the queue folder."""
    configured = options.get("doorbell_folder")
    if configured:
        return Path(configured)
    return Path(options.get("data_folder_in", "data_in")).parent / "doorbell"


class Transport(filesystem.Transport):
    """kombu's file-system transport with the safe channel above, whose consumer waits on a
    doorbell the publishers ring instead of looking at the queue folder every
    `polling_interval`."""

    Channel = Channel
    doorbell_fallback_s = 2.0  # a message whose publisher did not ring waits this long at most

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        fallback = client.transport_options.get("doorbell_fallback_s")
        if fallback is not None:
            self.doorbell_fallback_s = float(fallback)
        self._options: dict[str, Any] = client.transport_options
        self._doorbell: Doorbell | None = None
        self._doorbell_failed = False

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:  # type: ignore[override]
        """kombu's loop (a look at every queue until one has a message), but between empty
        looks the wait ends as soon as a publisher rings."""
        started = monotonic()
        doorbell = self._listen()  # before the first look: a message published after it rings
        get = self.cycle.get  # type: ignore[union-attr]  # made in kombu's __init__
        while True:
            try:
                get(self._deliver, timeout=timeout)
                return
            except Empty:
                left = None if timeout is None else timeout - (monotonic() - started)
                if left is not None and left <= 0:
                    raise TimeoutError() from None  # socket.timeout, as kombu raises
                self._wait(doorbell, left)

    def _wait(self, doorbell: Doorbell | None, left: float | None) -> None:
        """Until the next look: the ring (or the fallback) when the queues were empty; the
        polling interval when a channel could take no message (its tasks hold the prefetch:
        their acks ring nobody) or there is no doorbell."""
        if doorbell is not None and all(
            channel.qos.can_consume() for channel in self.channels if channel._consumers
        ):
            doorbell.wait(min(self.doorbell_fallback_s, left if left is not None else 1e9))
        elif self.polling_interval is not None:
            time.sleep(min(self.polling_interval, left if left is not None else 1e9))

    def _listen(self) -> Doorbell | None:
        """This connection's doorbell, made on its first drain (None if it cannot be made)."""
        if self._doorbell is None and not self._doorbell_failed:
            folder = doorbell_folder(self._options)
            try:
                self._doorbell = Doorbell(folder)
            except OSError as exc:
                self._doorbell_failed = True
                log.warning(
                    "broker: no doorbell in %s (%s); looking for messages every %ss",
                    folder,
                    exc,
                    self.polling_interval,
                )
        return self._doorbell

    def close_connection(self, connection: Any) -> None:
        try:
            super().close_connection(connection)
        finally:
            doorbell, self._doorbell = self._doorbell, None
            if doorbell is not None:
                doorbell.close()
