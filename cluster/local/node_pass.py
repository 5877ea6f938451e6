"""A pass of the local backend over every live run: advance each run from its files, then
admit waiting pods onto the node by priority.

Under the node's lock, each run under its own: attempts whose supervisor is gone are recorded,
a stop or cancellation is enforced, a run whose pods all ended is marked ended and its scratch
removed. Then `admission.admit` decides which pods start and which are evicted (extra workers
for higher priorities, other runs' pods from a reserved node), and the pass does it. A pass is
idempotent and safe to make from several processes at once.

A run whose files did not change since the pass before reads none of them again: the pass
keeps, per run, the times of the directories where its status can change (its `Signature`,
`cluster/local/statuses.py`), taken before its files were read, and reuses what it read while
they hold (and were older than the racy window when taken). It still checks, every pass, that
the supervisor of each running attempt is alive (one that was killed with its pod writes
nothing). A halted run is always read (its cancellation's grace runs out with no write).
"""

from __future__ import annotations

import logging
import shutil
import signal
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

from cluster.local import launcher
from cluster.local.admission import Decision, Demand, Holding, Key, admit
from cluster.local.atomic_files import locked
from cluster.local.attempts import Attempt, evict, kill_group, settle_lost
from cluster.local.dag import PodView, next_memory, next_processes
from cluster.local.doorbell import BELL_FILE
from cluster.local.launches import pod_shape
from cluster.local.reservation import NODE_LOCK, reserved_for
from cluster.local.run_files import CANCELLED, ENDED, STOPPED, RunFiles
from cluster.local.run_index import RunIndex
from cluster.local.standby import Standbys
from cluster.local.statuses import RunStatuses, Signature, run_listing, watched
from runs.ports import ENDED_PHASES, RunLaunch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Read:
    """What a pass read of a run: its pods, and the directories' times taken before."""

    signature: Signature
    trusted: bool  # every time older than the racy window when taken
    views: list[PodView]


class NodePass:
    """Passes over the live runs of one node; `idle_cores` is what the last one left free."""

    def __init__(
        self,
        *,
        index: RunIndex,
        statuses: RunStatuses,
        state: Path,
        node_name: str,
        cores: float,
        memory_gb: float,
        priority_value: Callable[[str], int],
        kill_margin_s: float,
        memory_poll_s: float,
        standbys: Standbys | None,
    ) -> None:
        """`statuses` is handed what each pass read; `standbys` (None: none) take pods over
        at their start; the rest as `LocalBackend` describes them."""
        self.index = index
        self.statuses = statuses
        self.state = state
        self.node_name = node_name
        self.cores = cores
        self.memory_gb = memory_gb
        self.priority_value = priority_value
        self.kill_margin_s = kill_margin_s
        self.memory_poll_s = memory_poll_s
        self.standbys = standbys
        self.idle_cores = cores  # after the last pass's admission: for the standbys
        self.live_runs = 0  # the live runs the last pass found (0: nothing for a pass to do)
        self._reads: dict[str, _Read] = {}  # run id → what the last pass read of it

    def run(self) -> tuple[bool, Hashable]:
        """One pass: whether it changed anything, and a signature of the pods it saw."""
        launcher.reap()
        begun_ns = time.time_ns()
        names: list[str] = []  # the live runs' workflows this pass read
        changed = False
        signature: list[Hashable] = []
        demands: list[Demand] = []
        holdings: list[Holding] = []
        running: dict[Key, Attempt] = {}
        # The node's lock: passes of several processes (worker, watcher, web) admit one at a
        # time, else two would each see the same free cores and both start pods on them.
        with locked(self.state / NODE_LOCK):
            live = self.index.live_runs()
            self.live_runs = len(live)
            for run in live:
                try:
                    # The run's lock: a cancel or stop (`LocalBackend._signal_run`) marks the
                    # run between this pass's read of it and its start of a pod, which would
                    # then run on.
                    with locked(run.lock):
                        launch, submitted = self.index.launch(run)
                        advanced, views, read_ns = self._advance(run, launch)
                        changed |= advanced
                        halted = run.halted
                    self.statuses.saw(run, launch, views, halted=halted, read_ns=read_ns)
                    names.append(launch.workflow_name)
                except (OSError, ValueError, KeyError):  # one broken run stops no other
                    log.exception("local backend: cannot advance run %s", run.run_id)
                    continue
                for v in views:
                    key = (launch.run_id, v.spec.name)
                    signature.append((key, v.phase, len(v.attempts)))
                    shape = pod_shape(launch.task(v.spec.task_id), v.spec)
                    memory, _ = next_memory(shape, v.attempts)
                    value = self.priority_value(v.spec.priority_class)
                    if v.running and v.last is not None:
                        running[key] = v.last
                        holdings.append(
                            Holding(
                                key,
                                value,
                                v.last.cores,
                                v.last.memory_gb,
                                v.spec.extra,
                                v.last.created,
                                v.last.eviction is not None,
                            )
                        )
                    elif v.startable and not halted:
                        order = (submitted, v.spec.index)
                        demands.append(Demand(key, value, shape.cores, memory, order))
            self._passed(live, names, begun_ns)
            reserved = reserved_for(self.state)
            decision = admit(self.cores, self.memory_gb, demands, holdings, reserved)
            self._act(decision, running)
        started = set(decision.start)
        busy = sum(h.cores for h in holdings) + sum(d.cores for d in demands if d.key in started)
        self.idle_cores = self.cores - busy
        return changed or bool(decision.start or decision.evict), tuple(signature)

    def _passed(self, live: list[RunFiles], names: list[str], begun_ns: int) -> None:
        """What the pass read is all the loop keeps: the runs not live any more are let go."""
        self.statuses.passed(names, begun_ns=begun_ns)
        kept = {run.run_id for run in live}
        self._reads = {k: v for k, v in self._reads.items() if k in kept}

    def _advance(self, run: RunFiles, launch: RunLaunch) -> tuple[bool, list[PodView], int]:
        """Settle lost attempts, enforce a stop or cancel, mark an ended run. Under its lock.

        Whether it changed anything, the pods as the files say afterwards, and when that read
        began (ns). A run whose files did not change since the last pass is not read again
        (`_unchanged`); its running attempts' supervisors are checked all the same."""
        now = time.time()
        read_ns = time.time_ns()
        views = self._unchanged(run)
        if views is not None:
            if not any(settle_lost(v.last, now) for v in views if v.running and v.last):
                return False, views, read_ns
            read_ns = time.time_ns()  # a lost attempt was recorded: read the run again
        changed = False
        cancelled = run.marked_at(CANCELLED)
        stopped = run.marked_at(STOPPED) is not None
        views = self._read(run, launch, read_ns)
        for view in views:
            last = view.last
            if last is None or last.ended:
                continue
            changed |= settle_lost(last, now)
            if cancelled is not None:
                changed |= evict(last, "the workflow was cancelled", now)
                if now - cancelled > launch.grace_s + self.kill_margin_s + 5:
                    kill_group(last.child, signal.SIGKILL)  # its supervisor did not
            elif stopped and view.spec.extra:
                changed |= evict(last, "the workflow was stopped", now)
        if changed:
            read_ns = time.time_ns()
            views = self._read(run, launch, read_ns)
        if all(v.phase in ENDED_PHASES for v in views):
            run.mark(ENDED)
            shutil.rmtree(self.state / "scratch" / run.run_id, ignore_errors=True)
            changed = True
        if changed or cancelled is not None or stopped:
            self._reads.pop(run.run_id, None)  # halted or changed: read again next pass
        return changed, views, read_ns

    def _read(self, run: RunFiles, launch: RunLaunch, read_ns: int) -> list[PodView]:
        """The run's pods as its files say now, noting the directories' times taken before."""
        listing = run_listing(run, launch)
        views = run.views(launch)
        directories = watched(listing, views)
        signature = Signature(tuple(directories), tuple(listing.times[d] for d in directories))
        self._reads[run.run_id] = _Read(signature, signature.trusted(read_ns), views)
        return views

    def _unchanged(self, run: RunFiles) -> list[PodView] | None:
        """What the last pass read of the run, if its files did not change since."""
        last = self._reads.get(run.run_id)
        if last is None or not last.trusted or not last.signature.holds():
            return None
        return last.views

    def _act(self, decision: Decision, running: dict[Key, Attempt]) -> None:
        for key, reason in decision.evict:
            evict(running[key], reason)
        by_run: dict[str, list[str]] = {}
        for run_id, pod in decision.start:
            by_run.setdefault(run_id, []).append(pod)
        for run_id, pods in by_run.items():
            run = self.index.files(run_id)
            # The run's lock: a cancel marked after `halted` was read would not stop the pod
            # started here; under it, the mark comes before the check or after the start.
            with locked(run.lock):
                launch, _ = self.index.launch(run)
                if run.halted:
                    continue
                views = {v.spec.name: v for v in run.views(launch)}
                for pod in pods:
                    if not views[pod].startable:
                        continue
                    try:
                        self._start(run, launch, views[pod])
                    except OSError:  # it stays queued; the next pass tries again
                        log.exception("local backend: cannot start %s of %s", pod, run_id)

    def _start(self, run: RunFiles, launch: RunLaunch, view: PodView) -> None:
        task = launch.task(view.spec.task_id)
        attempt = len(view.attempts)
        shape = pod_shape(task, view.spec)
        memory, per_worker = next_memory(shape, view.attempts)
        store = self.index.store
        place = launcher.PodPlace(
            run_dir=run.paths.root,
            task_dir=run.paths.task(task.task_id).root,
            snapshots_dir=store.snapshots,
            scratch=self.state / "scratch" / run.run_id / view.spec.name,
            bin_dir=launcher.environment_bin(store.environments, launch.environment),
        )
        env = launcher.pod_env(
            launch,
            task,
            view.spec,
            attempt=attempt,
            memory_gb=memory,
            per_worker_gb=per_worker,
            node=self.node_name,
            place=place,
            shape=shape,
            processes=next_processes(shape, view.attempts),
        )
        launcher.start_attempt(
            run.pods / view.spec.name / str(attempt),
            attempt=attempt,
            args=launcher.pod_args(view.spec, task),
            env=env,
            cwd=place.scratch,
            cores=shape.cores,
            memory_gb=memory,
            kill_after_s=launch.grace_s + self.kill_margin_s,
            poll_s=self.memory_poll_s,
            doorbell=self.state / BELL_FILE,
            standby=None if self.standbys is None else self.standbys.claimer(launch, view.spec),
        )
