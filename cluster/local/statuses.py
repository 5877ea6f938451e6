"""The statuses of many local runs at once, each read again only when its files changed.

A run's status is a function of its files (run_files.py, attempts.py): its launch (written
once), the markers in its `pods` directory, the attempt directories of each pod and the files
in each attempt directory. Every one of those files and directories is created, or written
under a temporary name and renamed or linked into place (atomic_files.py), so whenever one
appears or is replaced the modification time of the directory holding it changes: the `pods`
directory for a marker or a pod's first directory, a pod's directory for a new attempt, an
attempt's directory for its eviction, exit, supervisor and child files.

A run's *signature* is the modification times of the directories where its status can still
change, taken before its files are read:

- its `pods` directory (stop and cancel markers; a pod's first attempt);
- per pod whose last attempt runs, that attempt's directory only: no attempt of a pod starts
  while its last one runs, and that one ends by writing into its directory;
- per pod waiting for its first attempt or a retry, its directory (when it has one yet);
- nothing for a pod that succeeded, failed or was skipped: that is final.

A run whose signature holds costs one `stat` per running pod and one more, instead of some
thirty file reads. File systems stamp times with a coarse clock (a kernel tick, or a second on
some), so a change right after a read can leave a directory's time as it was; as git does with
its index, a signature is trusted only when all its times were older than `RACY_S` when taken:
a run that changed in the last seconds is read again at every call until it has been quiet.

The backend's loop reads every live run at each pass anyway; it hands what it read to `saw`,
and `latest` answers from it with no file access at all. Every entry is the newest read of its
run (by when the read began), so an answer is never older than one given before.

Every entry whose status changed is counted in a log of changes (`changes`): a controller's
tick asks which workflows changed since the mark of its last answer, and reads only those.
The log keeps the last changes of a few times the live runs; a mark older than that, or from
another instance, or asked while the loop has not passed for `PASS_TRUST_S`, is answered
"cannot say" (every status read).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from cluster.local.attempts import attempt_numbers
from cluster.local.dag import PodView, backend_status
from cluster.local.launches import run_pods
from cluster.local.run_files import RunFiles
from runs.plans import Node
from runs.ports import ENDED_PHASES, BackendStatus, Changes, RunLaunch

log = logging.getLogger(__name__)

RACY_S = 2.0
PASS_TRUST_S = 60.0  # a pass's read older than this is read again
LOG_MIN = 1024  # changes the log keeps at least (and 4 per entry)
MISSING = -1  # the time of a directory that does not exist


@dataclass(frozen=True)
class Signature:
    """Directories where a run's status can still change, and their times when read."""

    directories: tuple[str, ...]
    times: tuple[int, ...]

    def trusted(self, taken_ns: int, racy_s: float = RACY_S) -> bool:
        """Whether every time was older than `racy_s` when the signature was taken."""
        return max(self.times) < taken_ns - int(racy_s * 1e9)

    def holds(self) -> bool:
        """Whether every directory still has the time it had (the status did not change)."""
        return _times(self.directories) == self.times


def _times(directories: Collection[str]) -> tuple[int, ...]:
    found = []
    for directory in directories:
        try:
            found.append(os.stat(directory).st_mtime_ns)
        except FileNotFoundError:
            found.append(MISSING)
    return tuple(found)


@dataclass(frozen=True)
class _Listing:
    """A run's directories as found before its files were read, with their times."""

    pods: str
    pod_dirs: dict[str, str]  # pod name → its directory
    attempts: dict[str, list[int]]  # pod name → its attempt directories' numbers
    times: dict[str, int]

    def attempt_dir(self, pod: str, number: int) -> str:
        return os.path.join(self.pod_dirs[pod], str(number))


def run_listing(run: RunFiles, launch: RunLaunch) -> _Listing:
    """Every directory of the run's status, each stat'ed before it is listed."""
    pods = str(run.pods)
    pod_dirs = {spec.name: os.path.join(pods, spec.name) for spec in run_pods(launch)}
    times = dict(zip([pods, *pod_dirs.values()], _times([pods, *pod_dirs.values()]), strict=True))
    attempts: dict[str, list[int]] = {}
    for pod, pod_dir in pod_dirs.items():
        numbers = attempt_numbers(pod_dir)
        attempts[pod] = numbers
        folders = [os.path.join(pod_dir, str(n)) for n in numbers]
        times.update(zip(folders, _times(folders), strict=True))
    return _Listing(pods, pod_dirs, attempts, times)


def watched(listing: _Listing, views: Sequence[PodView]) -> list[str]:
    """The directories where the status read as `views` can still change (see above)."""
    found = [listing.pods]
    for view in views:
        pod = view.spec.name
        listed = listing.attempts.get(pod, [])
        last = view.last
        in_step = (last.number if last else None) == (listed[-1] if listed else None)
        if in_step and view.phase in ENDED_PHASES:
            continue
        if in_step and last is not None and view.running:
            found.append(listing.attempt_dir(pod, last.number))
            continue
        if listing.times[listing.pod_dirs[pod]] != MISSING:
            found.append(listing.pod_dirs[pod])
        newer = [n for n in listed if last is None or n > last.number]  # not readable yet
        found += [listing.attempt_dir(pod, n) for n in newer]
    return found


@dataclass(frozen=True)
class _Entry:
    """The newest read of a run's status files: by a caller (`signature` set: it can be
    checked) or by a pass of the backend's loop (`views` set: its status is made on demand)."""

    run: RunFiles
    launch: RunLaunch
    read_ns: int  # when the read began: a read that began earlier never replaces it
    status: BackendStatus | None = None
    node: Node | None = None  # what `status` was made for
    signature: Signature | None = None
    trusted: bool = False
    views: Sequence[PodView] | None = None
    halted: bool = False


def _unchanged(entry: _Entry | None, node: Node) -> BackendStatus | None:
    """The status of a checkable entry whose files did not change, else None."""
    if entry is None or entry.signature is None or entry.status is None or entry.node != node:
        return None
    return entry.status if entry.trusted and entry.signature.holds() else None


def _passed(
    names: Collection[str],
    entries: Mapping[str, _Entry],
    node: Node,
    reuse: Collection[str],
    after: Mapping[str, int],
    passed: int,
) -> tuple[dict[str, BackendStatus | None], list[str]]:
    """The statuses a pass's read made already for `node`, of the names that may reuse one
    read after `passed` (and after their time in `after`); the other names, in order. What
    `RunStatuses.latest` answers, in one loop: a controller's tick asks it of every live run."""
    found: dict[str, BackendStatus | None] = {}
    rest = []
    for name in names:
        entry = entries.get(name) if name in reuse else None
        if (
            entry is not None
            and entry.status is not None
            and entry.views is not None
            and entry.read_ns >= (max(passed, after[name]) if after.get(name) else passed)
            and (entry.node is node or entry.node == node)
        ):
            found[name] = entry.status
        else:
            rest.append(name)
    return found, rest


def status_node(node: Node) -> Node:
    """The node as far as a status depends on it (its name, cores and memory: why a pod can
    never start), so that its free scratch or a reservation changing does not make every
    status anew."""
    return Node(node.name, node.cores, node.memory_gb)


def _trusted_since() -> int:
    """The time (ns) a pass's read must have begun after to be answered."""
    return time.time_ns() - int(PASS_TRUST_S * 1e9)


class RunStatuses:
    """The newest status read of each run: checked by its signature, or what the backend's
    loop read in its last pass.

    Safe to share between threads (the backend's loop and the caller's). `one` answers what
    the files say now; `latest` may answer what the loop's last pass read (`PASS_TRUST_S` at
    most before), which is never older than what this process answered before.
    """

    def __init__(self, find: Callable[[str], RunFiles], *, racy_s: float = RACY_S) -> None:
        """`find`: the run of a workflow name, KeyError when there is none."""
        self._find = find
        self.racy_s = racy_s
        self._entries: dict[str, _Entry] = {}
        self._node: Node | None = None  # the node the last `read` was for
        # The backend's loop writes entries while callers read them: without it a caller could
        # read an entry half replaced, or a forget racing a saw could drop a fresher entry.
        self._lock = threading.Lock()
        self.reads = 0  # statuses read from the files by a caller (not from a signature)
        self._epoch = object()  # marks of another instance are not known here
        self._count = 0  # changes counted so far
        self._log: list[tuple[int, str]] = []  # (count, workflow) of each change, oldest first
        self._floor = 0  # the changes up to this count are no longer in the log
        self._passed_ns = 0  # when the loop's last whole pass began

    def _changed(self, name: str) -> None:
        """Count a change of the workflow's status (under the lock)."""
        self._count += 1
        self._log.append((self._count, name))
        if len(self._log) > max(LOG_MIN, 4 * len(self._entries)):
            half = len(self._log) // 2
            self._floor = self._log[half - 1][0]
            del self._log[:half]

    def changes(self, since: Hashable | None) -> Changes:
        """The workflows whose status changed after the mark `since` (None: the log cannot
        say), and the mark of now."""
        with self._lock:
            mark = (self._epoch, self._count)
            known = isinstance(since, tuple) and len(since) == 2 and since[0] is self._epoch
            if not known or since[1] < self._floor or self._passed_ns < _trusted_since():  # type: ignore[index]
                return Changes(None, mark)
            names = set()
            for count, name in reversed(self._log):
                if count <= since[1]:  # type: ignore[index]
                    break
                names.add(name)
        return Changes(frozenset(names), mark)

    def passed(self, names: Collection[str], *, begun_ns: int) -> None:
        """A pass of the loop that began at `begun_ns` read these workflows (every live one):
        the entries of the others are dropped (their runs ended or went away)."""
        self.forget(names)
        with self._lock:
            self._passed_ns = max(self._passed_ns, begun_ns)

    def read(
        self,
        names: Collection[str],
        node: Node,
        *,
        may_reuse: Collection[str] = (),
        since_ns: int | None = None,
    ) -> dict[str, BackendStatus | None]:
        """The status of each workflow (`latest` for those in `may_reuse`, else `one`); None
        for one that does not exist; a run whose files cannot be read is left out (logged).
        `may_reuse` as a mapping gives per name a time (ns since the epoch) the pass's read
        must have begun after, besides `since_ns`."""
        after = may_reuse if isinstance(may_reuse, Mapping) else {}
        reuse = may_reuse if isinstance(may_reuse, Mapping) else set(may_reuse)
        passed = _trusted_since() if since_ns is None else since_ns
        node = status_node(node)
        with self._lock:  # one copy, no lock per run; the node as the entries hold it
            entries = dict(self._entries)
            node = self._node = self._node if node == self._node else node
        found, rest = _passed(names, entries, node, reuse, after, passed)
        for name in rest:
            since = max(passed, after[name]) if after.get(name) else passed
            try:
                found[name] = (
                    self.latest(name, node, since_ns=since)
                    if name in reuse
                    else self.one(name, node)
                )
            except KeyError:
                found[name] = None
            except (OSError, ValueError):
                log.exception("local backend: cannot read the status of %s", name)
        return found

    def latest(self, name: str, node: Node, *, since_ns: int | None = None) -> BackendStatus:
        """What the last pass read of the workflow if it began after `since_ns` (default:
        `PASS_TRUST_S` ago), else what its files say now."""
        node = status_node(node)
        with self._lock:
            entry = self._entries.get(name)
        since = _trusted_since() if since_ns is None else since_ns
        if entry is None or entry.views is None or entry.read_ns < since:
            return self.one(name, node)
        if entry.status is not None and entry.node == node:
            return entry.status
        status = backend_status(entry.launch, entry.views, node, halted=entry.halted)
        with self._lock:
            if self._entries.get(name) is entry:
                self._entries[name] = replace(entry, status=status, node=node)
        return status

    def saw(
        self,
        run: RunFiles,
        launch: RunLaunch,
        views: Sequence[PodView],
        *,
        halted: bool,
        read_ns: int,
    ) -> None:
        """What a pass of the loop read of a run (under its lock), begun at `read_ns`. Its
        status is made here (in the loop's thread) for the node statuses were last asked for,
        and is the same object as before while equal, so comparing it costs nothing. The same
        `views` object as the last pass's (the pass found the run's files unchanged) only
        renews the entry's time."""
        name = launch.workflow_name
        with self._lock:
            before = self._entries.get(name)
            if before is not None and before.read_ns >= read_ns:
                return
            if before is not None and before.views is views and before.halted == halted:
                self._entries[name] = replace(before, read_ns=read_ns)
                return
        status, node = None, None
        if before is not None and before.status is not None and before.node is not None:
            node = before.node
            made = backend_status(launch, views, node, halted=halted)
            status = before.status if made == before.status else made  # None: not made
        elif self._node is not None:  # a new run, for the node statuses were last asked for
            node = self._node
            status = backend_status(launch, views, node, halted=halted)
        with self._lock:
            current = self._entries.get(name)
            if current is None or current.read_ns < read_ns:
                self._entries[name] = _Entry(
                    run, launch, read_ns, status, node, views=views, halted=halted
                )
                if before is None or current is not before or status is not before.status:
                    self._changed(name)  # new, replaced meanwhile, or its status changed

    def one(self, name: str, node: Node) -> BackendStatus:
        """The status of one workflow as its files say now; KeyError when it does not exist."""
        node = status_node(node)
        with self._lock:
            entry = self._entries.get(name)
        unchanged = _unchanged(entry, node)
        if unchanged is not None:
            return unchanged
        run = entry.run if entry is not None else self._find(name)
        try:
            launch = entry.launch if entry is not None else run.launch()[0]
            taken = time.time_ns()
            listing = run_listing(run, launch)
            if listing.times[listing.pods] == MISSING:
                raise KeyError(name)
            views = run.views(launch)
            status = backend_status(launch, views, node, halted=run.halted)
        except KeyError:
            with self._lock:
                self._entries.pop(name, None)
            raise
        directories = watched(listing, views)
        signature = Signature(tuple(directories), tuple(listing.times[d] for d in directories))
        trusted = signature.trusted(taken, self.racy_s)
        with self._lock:
            current = self._entries.get(name)
            if current is None or current.read_ns < taken:
                if current is not None and current.status is not None and current.status == status:
                    status = current.status  # the same object while equal
                else:
                    self._changed(name)
                self._entries[name] = _Entry(
                    run,
                    launch,
                    taken,
                    status,
                    node,
                    signature,
                    trusted,
                )
            self.reads += 1
        return status

    def forget(self, keep: Collection[str]) -> None:
        """Drop the entries of workflows not in `keep` (runs that ended or went away)."""
        kept = set(keep)
        with self._lock:
            for name in self._entries.keys() - kept:
                del self._entries[name]
