"""LocalBackend: this machine is the one node; pods are supervised process groups.

Everything a run is lives in files, so any process that opens the store can advance it and a
restarted service finds its pods (see docs/local-backend.md):

    <state>/workflows/<workflow>.json   the run id of a workflow name (cluster/local/run_index.py)
    <state>/reservation.json            the run the node is reserved for (reservation.py)
    <state>/node.lock                   held while pods are admitted
    <state>/scratch/<run>/<pod>/        the pods' scratch, removed when the run ended
    <state>/wheels/                     the harness's wheels for environments
    <state>/standby/<environment>/      standby pods (cluster/local/standby.py)
    <run>/pods/...                      the run's files (cluster/local/run_files.py)

`tick()` makes a pass over every live run (cluster/local/node_pass.py): it records attempts
whose supervisor is gone, enforces stops and cancellations, then admits waiting pods by
priority under the node's lock, evicting extra workers for higher priorities and other runs'
pods from a reserved node. It is idempotent and safe to call from several processes at once.
The background loop that `subscribe()` starts calls it; without that loop, `status()` and
`statuses()` call it once each. Statuses are read from the files, again only for runs whose
files changed (cluster/local/statuses.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from cluster.local import launcher, reservation, venvs
from cluster.local.admission import priority_lookup
from cluster.local.atomic_files import locked
from cluster.local.attempts import evict
from cluster.local.doorbell import BELL_FILE, ring
from cluster.local.loop import Loop
from cluster.local.machine import default_cores, default_memory_gb, free_scratch_gb, machine_name
from cluster.local.node_pass import NodePass
from cluster.local.plugin_questions import ask_once
from cluster.local.run_files import CANCELLED, STOPPED
from cluster.local.run_index import RunIndex
from cluster.local.standby import Standbys
from cluster.local.statuses import RunStatuses, status_node
from runs.local_packages import LocalPackageRules
from runs.plans import Node
from runs.ports import (
    LOG_LIMIT_BYTES,
    UNKNOWN_CHANGES,
    BackendStatus,
    Changes,
    Placement,
    PodLog,
    RunLaunch,
    read_log,
)
from simrun_harness import store_reads
from simrun_harness.layout import StorePaths

log = logging.getLogger(__name__)

STANDBY_LOOK_S = 5.0  # with no live run but standbys kept, the loop passes this often


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
        standby_idle_s: float = float("inf"),
        local_packages: LocalPackageRules | None = None,
    ) -> None:
        """`store`: the run store; `cores`/`memory_gb`: what runs may use (default: this
        machine's less a margin); `priority_value`: a priority class's value (default
        `runs.priorities.value_of`); `state_dir`: the backend's own files (default
        `<store>/local`); `wheels_dir`: where the harness's wheels are built for environments
        (default `<state>/wheels`); `poll_s`: the background loop's interval; `memory_poll_s`:
        how often a supervisor measures memory; `kill_margin_s`: seconds past a run's grace
        before a pod that ignores SIGTERM is killed; `scratch_gb`: the scratch pods may ask
        for (default: the free disk under the state directory, measured at each `nodes()`,
        less a margin); `standby`: how many standby pods the loop keeps per environment;
        `standby_idle_s`: an environment whose pods were last launched longer ago keeps
        none; `local_packages`: where a model's local packages may lie besides its snapshot
        (default: only there)."""
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
        self.local_packages = local_packages or LocalPackageRules()
        self._standbys = self._standbys_of(standby, standby_idle_s)
        self._index = RunIndex(self.store, self.state / "workflows")
        self._statuses = RunStatuses(self._index.run)
        self._passes = NodePass(
            index=self._index,
            statuses=self._statuses,
            state=self.state,
            node_name=self.node_name,
            cores=self.cores,
            memory_gb=self.memory_gb,
            priority_value=self.priority_value,
            kill_margin_s=kill_margin_s,
            memory_poll_s=memory_poll_s,
            standbys=self._standbys,
        )
        self._loop = Loop(
            self._pass, bell=self.state / BELL_FILE, poll_s=poll_s, quiet=self.quiet_s
        )

    def _standbys_of(self, count: int, idle_s: float) -> Standbys | None:
        """The standby pods the loop keeps (None: none, every pod a fresh process)."""
        if count <= 0:
            return None
        bin_of = partial(launcher.environment_bin, self.store.environments)
        return Standbys(self.state / "standby", count=count, bin_of=bin_of, idle_s=idle_s)

    def tick(self) -> bool:
        """Advance every live run and admit what can start; whether anything changed.

        A change made here (a pod started after `unreserve`, a lost attempt found by a
        status read) rings the doorbell: the loop of another process (the watcher's) hears
        of it at once, not at its next unasked pass, up to `loop.CALM_S` away."""
        changed = self._passes.run()[0]
        if changed:
            ring(self.state / BELL_FILE)
        return changed

    def _pass(self) -> tuple[bool, Hashable]:
        """A pass of the loop: a tick, then the standbys kept (only the loop starts them)."""
        found = self._passes.run()
        if self._standbys is not None:
            try:
                # a new standby's imports take a core for a moment: not from running pods
                self._standbys.keep(may_start=self._passes.idle_cores >= min(1.0, self.cores))
            except OSError:  # the next pass tries again; the pods start fresh meanwhile
                log.exception("local backend: cannot keep the standby pods")
        return found

    def quiet_s(self) -> float | None:
        """After a pass: None while runs are live (the loop passes every `poll_s`, spaced
        out up to `loop.CALM_S` while its passes find nothing new), else how
        long the loop may wait for a ring: while standbys are kept, `STANDBY_LOOK_S` at most
        (one that died is replaced, one whose environment went idle ends), else for good
        (`loop.QUIET_S`)."""
        if self._passes.live_runs:
            return None
        due = self._standbys.due_in_s() if self._standbys is not None else None
        return float("inf") if due is None else min(STANDBY_LOOK_S, due)

    # -- the protocol -----------------------------------------------------------------------

    def submit(self, launch: RunLaunch) -> str:
        """Record the run's launch; its pods start at the next tick. Idempotent by name."""
        if self._index.entry(launch.workflow_name).exists():
            return launch.workflow_name
        run = self._index.files(launch.run_id)
        # The run's lock, which a pass holds while it reads and advances a run: the launch is
        # recorded before, never during, another process's pass over the run's pods.
        with locked(run.lock):
            run.create(launch)
        self._index.add(launch)
        self.tick()
        ring(self.state / BELL_FILE)  # a loop in another process (the watcher) looks now
        return launch.workflow_name

    def status(self, name: str) -> BackendStatus:
        self._index.run(name)  # KeyError before any pass for a workflow that does not exist
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
        return self._statuses.read(names, node, may_reuse=may_reuse, since_ns=since)

    def changes(self, since: Hashable | None) -> Changes:
        """What changed since the mark `since`, from the statuses the loop's passes read
        (`RunStatuses.changes`); without a loop, or for another node (its statuses differ),
        it cannot say."""
        if not self._looping():
            return UNKNOWN_CHANGES
        node = status_node(self.nodes()[0])
        known = isinstance(since, tuple) and len(since) == 2 and since[0] == node
        found = self._statuses.changes(since[1] if known else None)  # type: ignore[index]
        return Changes(found.names, (node, found.mark))

    def revisions(self, names: Collection[str]) -> None:
        """None: the statuses come from the loop's pass (`statuses`), already without a read
        of a run whose files did not change."""
        return None

    def _signal_run(self, name: str, marker: str, reason: str, extras_only: bool) -> None:
        run = self._index.run(name)
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
        run = self._index.run(name)
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
                    handle = store_reads.open_file(self.store.root, a.log)
                    text, cut = read_log(handle, tail_lines, LOG_LIMIT_BYTES)
                    entry = PodLog(view.spec.name, a.number, text, a.ended, truncated=cut)
                except OSError as exc:
                    entry = PodLog(view.spec.name, a.number, ended=a.ended, error=str(exc))
                found.append((a.created, entry))
        return [entry for _, entry in sorted(found, key=lambda item: item[0])]

    def nodes(self) -> list[Node]:
        reserved = reservation.reserved_for(self.state)
        scratch = self.scratch_gb if self.scratch_gb is not None else free_scratch_gb(self.state)
        return [Node(self.node_name, self.cores, self.memory_gb, 0, reserved, scratch)]

    def placements(self) -> list[Placement]:
        found = []
        for run in self._index.live_runs():
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
        reservation.reserve(self.state, node=node, run_id=run_id)
        self.tick()

    def unreserve(self, node: str, run_id: str) -> None:
        """Release the run's reservation; another run's reservation stays."""
        self._check_node(node)
        reservation.release(self.state, run_id=run_id)
        self.tick()

    def _check_node(self, node: str) -> None:
        if node != self.node_name:
            raise KeyError(node)

    def build_image(self, context: Mapping[str, bytes], ref: str) -> None:
        venvs.build_environment(
            context, ref, self.store.environments, self.wheels, self.local_packages
        )

    def has_image(self, ref: str) -> bool:
        return venvs.environment_exists(ref, self.store.environments)

    def ask_plugin_host(
        self,
        environment: str,
        questions: Sequence[Mapping[str, Any]],
        *,
        timeout_s: float,
        memory_mb: int,
    ) -> list[dict[str, Any]]:
        bin_dir = launcher.environment_bin(self.store.environments, environment)
        return ask_once(
            bin_dir, self.store.root, questions, timeout_s=timeout_s, memory_mb=memory_mb
        )

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
