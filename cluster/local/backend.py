"""LocalBackend: this machine is the one node; pods are supervised process groups.

Everything a run is lives in files, so any process that opens the store can advance it and a
restarted service finds its pods (see docs/local-backend.md):

    <state>/workflows/<workflow>.json   the run id of a workflow name (the index)
    <state>/reservation.json            the run the node is reserved for
    <state>/node.lock                   held while pods are admitted
    <state>/scratch/<run>/<pod>/        the pods' scratch, removed when the run ended
    <state>/wheels/                     the harness's wheels for environments
    <state>/standby/<environment>/      standby pods (cluster/local/standby.py)
    <run>/pods/...                      the run's files (cluster/local/run_files.py)

`tick()` advances every live run: it records attempts whose supervisor is gone, enforces
stops and cancellations, then admits waiting pods by priority under the node's lock, evicting
extra workers for higher priorities and other runs' pods from a reserved node. It is
idempotent and safe to call from several processes at once. The background loop that
`subscribe()` starts calls it; without that loop, `status()` and `statuses()` call it once
each. Statuses are read from the files, again only for runs whose files changed
(cluster/local/statuses.py).
"""

from __future__ import annotations

import logging
import shutil
import signal
import time
from collections.abc import Callable, Collection, Hashable, Mapping
from functools import partial
from pathlib import Path

from cluster.local import launcher, venvs
from cluster.local.admission import Decision, Demand, Holding, Key, admit, priority_lookup
from cluster.local.atomic_files import create_json, locked, read_json, write_json
from cluster.local.attempts import Attempt, evict, kill_group, settle_lost
from cluster.local.dag import PodView, next_memory, next_processes
from cluster.local.doorbell import BELL_FILE, ring
from cluster.local.launches import pod_shape
from cluster.local.loop import Loop
from cluster.local.machine import default_cores, default_memory_gb, free_scratch_gb, machine_name
from cluster.local.run_files import CANCELLED, ENDED, STOPPED, RunFiles
from cluster.local.standby import Standbys
from cluster.local.statuses import RunStatuses
from runs.plans import Node
from runs.ports import (
    ENDED_PHASES,
    LOG_LIMIT_BYTES,
    BackendStatus,
    Placement,
    PodLog,
    RunLaunch,
    read_log,
)
from simrun_harness.layout import StorePaths, check_name

log = logging.getLogger(__name__)


class LocalBackend:
    """The embedded backend: runs the pods of runs as processes on this machine."""

    def __init__(
        self,
        store: Path,
        *,
        cores: float | None = None,
        memory_gb: float | None = None,
        node_name: str | None = None,
        priority_value: Callable[[str], int] | Mapping[str, int] | None = None,
        state_dir: Path | None = None,
        wheels_dir: Path | None = None,
        poll_s: float = 1.0,
        memory_poll_s: float = 0.1,
        kill_margin_s: float = 30.0,
        scratch_gb: float | None = None,
        standby: int = 0,
    ) -> None:
        """`store`: the run store; `cores`/`memory_gb`: what runs may use (default: this
        machine's less a margin); `priority_value`: a priority class's value (default
        `runs.priorities.value_of`); `state_dir`: the backend's own files (default
        `<store>/local`); `wheels_dir`: where the harness's wheels are built for environments
        (default `<state>/wheels`); `poll_s`: the background loop's interval; `memory_poll_s`:
        how often a supervisor measures memory; `kill_margin_s`: seconds past a run's grace
        before a pod that ignores SIGTERM is killed; `scratch_gb`: the scratch pods may ask
        for (default: the free disk under the state directory, measured at each `nodes()`,
        less a margin)."""
        self.store = StorePaths(Path(store))
        self.node_name = node_name or machine_name()
        self.cores = float(cores) if cores is not None else default_cores()
        self.memory_gb = float(memory_gb) if memory_gb is not None else default_memory_gb()
        self.priority_value = priority_lookup(priority_value)
        self.state = Path(state_dir) if state_dir is not None else self.store.root / "local"
        self.wheels = Path(wheels_dir) if wheels_dir is not None else self.state / "wheels"
        self.poll_s = poll_s
        self.memory_poll_s = memory_poll_s
        self.kill_margin_s = kill_margin_s
        self.scratch_gb = scratch_gb
        self._standbys = (
            Standbys(
                self.state / "standby",
                count=standby,
                bin_of=partial(launcher.environment_bin, self.store.environments),
            )
            if standby > 0
            else None
        )
        self._idle_cores = self.cores  # after the last pass's admission: for the standbys
        self._loop = Loop(self._pass, bell=self.state / BELL_FILE, poll_s=poll_s)
        self._statuses = RunStatuses(self._run)
        # Written once and never changed: the run id of each index entry (None once the run
        # ended: an end is final, and a pass no longer looks at it) and each live run's launch.
        self._indexed: dict[str, str | None] = {}
        self._launches: dict[str, tuple[RunLaunch, float]] = {}

    # -- files ------------------------------------------------------------------------------

    def _index(self, name: str) -> Path:
        return self.state / "workflows" / f"{check_name(name, what='workflow name')}.json"

    def _run(self, name: str) -> RunFiles:
        """The run of a workflow; KeyError when there is none (or its files are gone)."""
        try:
            entry = read_json(self._index(name))
        except ValueError:  # not a valid name: no such workflow
            raise KeyError(name) from None
        if entry is None:
            raise KeyError(name)
        run = RunFiles(self.store.run(entry["run_id"]))
        if not run.exists():
            raise KeyError(name)
        return run

    def _live_runs(self) -> list[RunFiles]:
        index = self.state / "workflows"
        runs = []
        names = sorted(index.glob("*.json")) if index.is_dir() else []
        for entry in names:
            if entry.name not in self._indexed:
                data = read_json(entry)
                if data is None:
                    continue
                self._indexed[entry.name] = str(data["run_id"])
            run_id = self._indexed[entry.name]
            if run_id is None:
                continue
            run = RunFiles(self.store.run(run_id))
            if run.ended:
                self._indexed[entry.name] = None
            elif run.exists():
                runs.append(run)
        kept = {run.run_id for run in runs}
        for gone in [r for r in self._launches if r not in kept]:
            del self._launches[gone]
        if len(self._indexed) > len(names):
            listed = {entry.name for entry in names}
            self._indexed = {k: v for k, v in self._indexed.items() if k in listed}
        return runs

    def _launch(self, run: RunFiles) -> tuple[RunLaunch, float]:
        """The run's launch and submission time, read once per process."""
        found = self._launches.get(run.run_id)
        if found is None:
            found = self._launches[run.run_id] = run.launch()
        return found

    # -- the advance ------------------------------------------------------------------------

    def _advance(self, run: RunFiles, launch: RunLaunch) -> tuple[bool, list[PodView], int]:
        """Settle lost attempts, enforce a stop or cancel, mark an ended run. Under its lock.

        Whether it changed anything, the pods as the files say afterwards, and when that read
        began (ns)."""
        now = time.time()
        changed = False
        cancelled = run.marked_at(CANCELLED)
        stopped = run.marked_at(STOPPED) is not None
        read_ns = time.time_ns()
        views = run.views(launch)
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
            views = run.views(launch)
        if all(v.phase in ENDED_PHASES for v in views):
            run.mark(ENDED)
            shutil.rmtree(self.state / "scratch" / run.run_id, ignore_errors=True)
            changed = True
        return changed, views, read_ns

    def tick(self) -> bool:
        """Advance every live run and admit what can start; whether anything changed."""
        return self._tick()[0]

    def _pass(self) -> tuple[bool, Hashable]:
        """A pass of the loop: a tick, then the standbys kept (only the loop starts them)."""
        found = self._tick()
        if self._standbys is not None:
            try:
                # a new standby's imports take a core for a moment: not from running pods
                self._standbys.keep(may_start=self._idle_cores >= min(1.0, self.cores))
            except OSError:  # the next pass tries again; the pods start fresh meanwhile
                log.exception("local backend: cannot keep the standby pods")
        return found

    def _tick(self) -> tuple[bool, Hashable]:
        launcher.reap()
        changed = False
        signature: list[Hashable] = []
        demands: list[Demand] = []
        holdings: list[Holding] = []
        running: dict[Key, Attempt] = {}
        # The node's lock: passes of several processes (worker, watcher, web) admit one at a
        # time, else two would each see the same free cores and both start pods on them.
        with locked(self.state / "node.lock"):
            for run in self._live_runs():
                try:
                    # The run's lock: a cancel or stop (`_signal_run`) marks the run between
                    # this pass's read of it and its start of a pod, which would then run on.
                    with locked(run.lock):
                        launch, submitted = self._launch(run)
                        advanced, views, read_ns = self._advance(run, launch)
                        changed |= advanced
                        halted = run.halted
                    self._statuses.saw(run, launch, views, halted=halted, read_ns=read_ns)
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
            reservation = read_json(self.state / "reservation.json")
            reserved = None if reservation is None else str(reservation["run_id"])
            decision = admit(self.cores, self.memory_gb, demands, holdings, reserved)
            self._act(decision, running)
        started = set(decision.start)
        busy = sum(h.cores for h in holdings) + sum(d.cores for d in demands if d.key in started)
        self._idle_cores = self.cores - busy
        return changed or bool(decision.start or decision.evict), tuple(signature)

    def _act(self, decision: Decision, running: dict[Key, Attempt]) -> None:
        for key, reason in decision.evict:
            evict(running[key], reason)
        by_run: dict[str, list[str]] = {}
        for run_id, pod in decision.start:
            by_run.setdefault(run_id, []).append(pod)
        for run_id, pods in by_run.items():
            run = RunFiles(self.store.run(run_id))
            # The run's lock: a cancel marked after `halted` was read would not stop the pod
            # started here; under it, the mark comes before the check or after the start.
            with locked(run.lock):
                launch, _ = self._launch(run)
                if run.halted:
                    continue
                views = {v.spec.name: v for v in run.views(launch)}
                for pod in pods:
                    if not views[pod].startable:
                        continue
                    try:
                        self._start(run, launch, views[pod])
                    except OSError:  # it stays queued; the next tick tries again
                        log.exception("local backend: cannot start %s of %s", pod, run_id)

    def _start(self, run: RunFiles, launch: RunLaunch, view: PodView) -> None:
        task = launch.task(view.spec.task_id)
        attempt = len(view.attempts)
        shape = pod_shape(task, view.spec)
        memory, per_worker = next_memory(shape, view.attempts)
        place = launcher.PodPlace(
            run_dir=run.paths.root,
            task_dir=run.paths.task(task.task_id).root,
            snapshots_dir=self.store.snapshots,
            scratch=self.state / "scratch" / run.run_id / view.spec.name,
            bin_dir=launcher.environment_bin(self.store.environments, launch.environment),
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
            standby=None if self._standbys is None else self._standbys.claimer(launch, view.spec),
        )

    # -- the protocol -----------------------------------------------------------------------

    def submit(self, launch: RunLaunch) -> str:
        """Record the run's launch; its pods start at the next tick. Idempotent by name."""
        index = self._index(launch.workflow_name)
        if index.exists():
            return launch.workflow_name
        run = RunFiles(self.store.run(launch.run_id))
        # The run's lock, which a pass holds while it reads and advances a run: the launch is
        # recorded before, never during, another process's pass over the run's pods.
        with locked(run.lock):
            run.create(launch)
        create_json(index, {"run_id": launch.run_id})
        self.tick()
        ring(self.state / BELL_FILE)  # a loop in another process (the watcher) looks now
        return launch.workflow_name

    def status(self, name: str) -> BackendStatus:
        self._run(name)  # KeyError before any pass for a workflow that does not exist
        if self._looping():
            # With a subscriber's loop, a status is a read: a reconcile of N runs must not
            # make N passes over all of them.
            [node] = self.nodes()
            return self._statuses.one(name, node)
        # Without a loop nothing else advances the runs: a pass, which reads the run.
        since = time.time_ns()
        self.tick()
        [node] = self.nodes()
        return self._statuses.latest(name, node, since_ns=since)

    def statuses(
        self, names: Collection[str], *, may_reuse: Collection[str] = ()
    ) -> dict[str, BackendStatus | None]:
        """The status of every named workflow from one pass at most. Without a subscriber's
        loop, that pass is made now and its reads answer. With one, names in `may_reuse` get
        what the loop's last pass read (no file access); the others are read now, a run whose
        files did not change since its last read costing a few `stat` calls
        (cluster/local/statuses.py)."""
        since = None
        if not self._looping():  # a pass now, which reads every live run
            since = time.time_ns()
            self.tick()
            may_reuse = names
        [node] = self.nodes()
        found = self._statuses.read(names, node, may_reuse=may_reuse, since_ns=since)
        self._statuses.forget(names)
        return found

    def revisions(self, names: Collection[str]) -> None:
        """None: the statuses come from the loop's pass (`statuses`), already without a read
        of a run whose files did not change."""
        return None

    def _signal_run(self, name: str, marker: str, reason: str, extras_only: bool) -> None:
        run = self._run(name)
        # The run's lock: a pass that read the run unmarked would start a pod after the
        # evictions below, which then runs on in a cancelled or stopped run.
        with locked(run.lock):
            launch, _ = run.launch()
            run.mark(marker)
            for view in run.views(launch):
                running = view.last is not None and not view.last.ended
                if running and view.last is not None and (view.spec.extra or not extras_only):
                    evict(view.last, reason)
        ring(self.state / BELL_FILE)

    def cancel(self, name: str) -> None:
        """SIGTERM every running pod (killed after the grace), skip the rest."""
        self._signal_run(name, CANCELLED, "the workflow was cancelled", extras_only=False)

    def stop(self, name: str) -> None:
        """Start nothing more, terminate running extra workers; base pods finish."""
        self._signal_run(name, STOPPED, "the workflow was stopped", extras_only=True)

    def logs(self, name: str, task_id: str, tail_lines: int | None = None) -> list[PodLog]:
        run = self._run(name)
        launch, _ = run.launch()
        if task_id not in {t.task_id for t in launch.tasks}:
            raise KeyError(task_id)
        found: list[tuple[float, PodLog]] = []
        for view in run.views(launch):
            if view.spec.task_id != task_id:
                continue
            if not view.attempts:
                found.append((float("inf"), PodLog(view.spec.name, 0, error="not started")))
            for a in view.attempts:
                try:
                    text, cut = read_log(a.log, tail_lines, LOG_LIMIT_BYTES)
                    entry = PodLog(view.spec.name, a.number, text, a.ended, truncated=cut)
                except OSError as exc:
                    entry = PodLog(view.spec.name, a.number, ended=a.ended, error=str(exc))
                found.append((a.created, entry))
        return [entry for _, entry in sorted(found, key=lambda item: item[0])]

    def nodes(self) -> list[Node]:
        reservation = read_json(self.state / "reservation.json")
        reserved = None if reservation is None else str(reservation["run_id"])
        scratch = self.scratch_gb if self.scratch_gb is not None else free_scratch_gb(self.state)
        return [Node(self.node_name, self.cores, self.memory_gb, 0, reserved, scratch)]

    def placements(self) -> list[Placement]:
        found = []
        for run in self._live_runs():
            launch, _ = run.launch()
            for v in run.views(launch):
                if v.running and v.last is not None:
                    found.append(
                        Placement(
                            launch.run_id,
                            v.spec.task_id,
                            v.spec.name,
                            self.node_name,
                            "running",
                            v.last.cores,
                            v.last.memory_gb,
                        )
                    )
        return found

    def reserve(self, node: str, run_id: str) -> None:
        """Reserve the node for a run (replacing any reservation); evicts others' pods."""
        self._check_node(node)
        # The node's lock, which `unreserve` holds from its read to its unlink: without it a
        # reservation written between the two is deleted with the one released (the node
        # free while its run believes it reserved; tests/cluster/local/test_reservation_race.py).
        with locked(self.state / "node.lock"):
            write_json(self.state / "reservation.json", {"node": node, "run_id": run_id})
        self.tick()

    def unreserve(self, node: str, run_id: str) -> None:
        """Release the run's reservation; another run's reservation stays."""
        self._check_node(node)
        path = self.state / "reservation.json"
        # The node's lock: the reservation read here is the one unlinked, not one a `reserve`
        # of another run wrote meanwhile (that one would be lost).
        with locked(self.state / "node.lock"):
            current = read_json(path)
            if current is not None and current.get("run_id") == run_id:
                path.unlink(missing_ok=True)
        self.tick()

    def _check_node(self, node: str) -> None:
        if node != self.node_name:
            raise KeyError(node)

    def build_image(self, context: Mapping[str, bytes], ref: str) -> None:
        venvs.build_environment(context, ref, self.store.environments, self.wheels)

    def has_image(self, ref: str) -> bool:
        return venvs.environment_exists(ref, self.store.environments)

    def _looping(self) -> bool:
        return self._loop.running

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call `callback` from a background thread whenever a run's pods change."""
        self._loop.subscribe(callback)

    def close(self) -> None:
        """Stop the background loop and end the standbys it started (the pods keep
        running)."""
        self._loop.close()
        if self._standbys is not None:
            self._standbys.close()
