"""The simulated kubelet of every node: runs bound pods, reports them, stops them, keeps logs.

A pod bound to a live node starts at once: its init containers are reported Completed (the
executor's init copies a binary; nothing to run here), its containers start (see
`tests.sim.containers`) and the pod is Running with the conditions and container states a
real kubelet reports. A ConfigMap or Secret volume whose object is missing keeps the pod
Pending with its containers `ContainerCreating`, as a failed mount does.

Memory: every `memory_poll_s` the resident memory of each container's process tree is
measured; over its limit the whole group is killed and the container ends `OOMKilled`, exit
137 (seed 003 K6), the kill counted in the container's `memory.events` (`CgroupFiles`,
found through SIMRUN_CGROUP_ROOT). Ending: when every container ended the pod is Succeeded
(all 0) or Failed. With `single_process_oom_kill` (the kubelet's `singleProcessOOMKill`)
only the largest process of the group is killed, counted the same way, and the container
goes on unless that was its main process.

Deletion (`deletionTimestamp`): SIGTERM to every container, SIGKILL when the pod's
`deletionGracePeriodSeconds` passed on the simulator's clock, then the kubelet confirms with
a zero grace and the pod is gone, without a final status in between (what Argo saw on the
real cluster: the attempt errors `pod deleted` without exit code; seed 003 K2). A pod a
finalizer still holds (Kueue's `kueue.x-k8s.io/managed` not yet removed) gets its final
status first and lingers with it until the finalizer goes. Argo's
TerminateContainers (a stopped workflow) is `terminate_containers`: the same signals with
the pod's `terminationGracePeriodSeconds`, after the `podSpecPatch`; the pod then fails and
stays.

Images: the current Python environment runs every container; what an image has beyond it is
`image_paths[image]`, directories put first on the `PYTHONPATH` of that image's containers
(a plugin the image installed, another copy than the test process's).

Logs are files kept while the pod exists and removed with it (seed 003 K11). Node loss
(`kill_node`) kills the node's containers at once and stops reporting its pods; when the
node comes back, a pod still there that was running reports its containers terminated
`ContainerStatusUnknown` (137) and fails, one being deleted is confirmed gone. What a pod's
status says is `tests.sim.pod_status`.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.sim import status
from tests.sim.containers import (
    CgroupFiles,
    Container,
    Simulate,
    launch,
    start_process,
    tree_memory,
)
from tests.sim.pod_status import container_status, lost, reported
from tests.sim.quantities import memory_limit
from tests.sim.resources import CONFIGMAPS, NODES, PODS, SECRETS
from tests.sim.scheduling import ENDED
from tests.sim.store import Obj, Store, meta

BUILDCTL = ("buildctl", "buildctl-daemonless.sh")
CGROUP_ENV = "SIMRUN_CGROUP_ROOT"
"""Where a container finds its cgroup files (`CgroupFiles`): what simrun's harness reads in
place of /sys/fs/cgroup, unless the pod sets it itself."""


@dataclass
class PodRun:
    """The containers of one pod on its node."""

    uid: str
    namespace: str
    name: str
    node: str
    directory: Path
    started_at: str
    containers: dict[str, Container] = field(default_factory=dict)
    init: list[str] = field(default_factory=list)
    deleting: bool = False
    confirmed: bool = False


class Kubelet:
    """All nodes' kubelets in one (see the module docstring)."""

    name = "kubelet"

    def __init__(
        self,
        store: Store,
        workdir: Path,
        volume_dirs: Mapping[str, Path],
        buildkit: Simulate | None = None,
        memory_poll_s: float = 0.05,
        single_process_oom_kill: bool = False,
    ) -> None:
        self.store = store
        self.single_process_oom_kill = single_process_oom_kill
        self.workdir = workdir
        self.volume_dirs = dict(volume_dirs)
        self.buildkit = buildkit
        self.memory_poll_s = memory_poll_s
        self.down_nodes: set[str] = set()
        self.image_paths: dict[str, list[Path]] = {}
        self.runs: dict[str, PodRun] = {}
        self._lock = threading.Lock()
        self._next_memory = 0.0

    # -- the tick ------------------------------------------------------------------------

    def step(self) -> None:
        """Start, watch, stop and report the pods of the live nodes."""
        pods = self.store.objects(PODS)[0]
        nodes = {meta(n)["name"] for n in self.store.objects(NODES)[0]}
        alive = {meta(p)["uid"] for p in pods}
        for uid in [u for u in self.runs if u not in alive]:
            self._discard(uid)
        now = self.store.clock.time()
        check_memory = time.monotonic() >= self._next_memory
        if check_memory:
            self._next_memory = time.monotonic() + self.memory_poll_s
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or node in self.down_nodes or node not in nodes:
                continue
            run = self.runs.get(meta(pod)["uid"])
            if run is None:
                phase = (pod.get("status") or {}).get("phase")
                if meta(pod).get("deletionTimestamp"):
                    self.store.delete(PODS, meta(pod)["namespace"], meta(pod)["name"], grace=0)
                elif phase == "Running":  # it ran on this node before the node was lost
                    self.store.modify(PODS, meta(pod)["namespace"], meta(pod)["name"], lost)
                elif phase not in ENDED:
                    self._start(pod)
                continue
            if meta(pod).get("deletionTimestamp") and not run.deleting:
                run.deleting = True
                grace = float(meta(pod).get("deletionGracePeriodSeconds") or 0)
                for container in run.containers.values():
                    container.stop(now, grace, self.store.clock.stamp())
            self._poll(run, pod, now)
        if check_memory:
            self._enforce_memory()

    def _enforce_memory(self) -> None:
        """Measure every limited container's process tree; kill those over their limit."""
        limited = [
            c
            for run in self.runs.values()
            for c in run.containers.values()
            if c.memory_limit is not None and c.running and c.popen is not None
        ]
        if not limited:
            return
        used = tree_memory([c.popen.pid for c in limited if c.popen is not None])
        for container in limited:
            if container.popen is None:
                continue
            total, processes = used.get(container.popen.pid, (0, 1))
            if self.single_process_oom_kill:
                container.kill_largest(total)
            else:
                container.enforce_memory(total, processes)

    def _poll(self, run: PodRun, pod: Obj, now: float) -> None:
        stamp = self.store.clock.stamp()
        changed = [c.poll(now, stamp) for c in run.containers.values()]
        others = [c for c in run.containers.values() if c.kind != "wait"]
        if all(not c.running for c in others):
            for container in run.containers.values():
                if container.kind == "wait" and container.running:
                    container.finish(0, stamp)
                    changed.append(True)
        done = all(not c.running for c in run.containers.values())
        if run.deleting:
            if done and not run.confirmed:
                run.confirmed = True
                if meta(pod).get("finalizers"):  # it stays: with its final status
                    self._report(run, pod)
                self.store.delete(PODS, run.namespace, run.name, grace=0)
            return
        if any(changed):
            self._report(run, pod)

    # -- starting ------------------------------------------------------------------------

    def _missing_volume(self, pod: Obj) -> str | None:
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            for key, info in (("configMap", CONFIGMAPS), ("secret", SECRETS)):
                source = volume.get(key)
                name = (source or {}).get("name") or (source or {}).get("secretName")
                if (
                    source
                    and not source.get("optional")
                    and self.store.find(info, meta(pod)["namespace"], name or "") is None
                ):
                    return f'{key} "{name}" not found'
        return None

    def _start(self, pod: Obj) -> None:
        missing = self._missing_volume(pod)
        spec = pod.get("spec") or {}
        if missing is not None:
            waiting = {"waiting": {"reason": "ContainerCreating"}}
            statuses = [container_status(c, None, waiting) for c in spec.get("containers") or []]
            self.store.modify(
                PODS,
                meta(pod)["namespace"],
                meta(pod)["name"],
                lambda o: o["status"].update(containerStatuses=statuses),
            )
            return
        uid = meta(pod)["uid"]
        directory = self.workdir / "pods" / uid
        directory.mkdir(parents=True, exist_ok=True)
        stamp = self.store.clock.stamp()
        run = PodRun(
            uid,
            meta(pod)["namespace"],
            meta(pod)["name"],
            spec["nodeName"],
            directory,
            stamp,
            init=[c["name"] for c in spec.get("initContainers") or []],
        )
        for container in spec.get("containers") or []:
            run.containers[container["name"]] = self._container(pod, container, directory, stamp)
        with self._lock:
            self.runs[uid] = run
        self._report(run, pod)

    def _container(self, pod: Obj, spec: dict[str, Any], directory: Path, stamp: str) -> Container:
        log = directory / f"{spec['name']}.log"
        log.touch()
        labels = meta(pod).get("labels") or {}
        if spec["name"] == "wait" and "workflows.argoproj.io/workflow" in labels:
            return Container(spec["name"], "wait", log, stamp)
        run = launch(self.store, pod, spec, self.volume_dirs, directory)
        if not run.argv:
            return Container(spec["name"], "idle", log, stamp)
        own = [str(p) for p in self.image_paths.get(spec.get("image", ""), [])]
        if own:
            run.env["PYTHONPATH"] = os.pathsep.join([*own, run.env.get("PYTHONPATH", "")])
        if self.buildkit is not None and Path(run.argv[0]).name in BUILDCTL:
            code, text, seconds = self.buildkit(pod, run)
            log.write_text(text)
            finish = None if seconds is None else self.store.clock.time() + seconds
            return Container(
                spec["name"], "simulated", log, stamp, finish_at=finish, outcome=(code, "")
            )
        limit = memory_limit(spec)
        cgroup = CgroupFiles.create(directory / "cgroup" / spec["name"], limit)
        run.env.setdefault(CGROUP_ENV, str(cgroup.root))
        container = Container(
            spec["name"], "process", log, stamp, memory_limit=limit, cgroup=cgroup
        )
        try:
            container.popen = start_process(run, log)
        except OSError as error:
            container.finish(128, stamp, "StartError", f"failed to start: {error}")
        return container

    # -- reporting -----------------------------------------------------------------------

    def _report(self, run: PodRun, pod: Obj) -> None:
        apply = reported(pod, run.containers, run.started_at, self.store.clock.stamp())
        self.store.modify(PODS, run.namespace, run.name, apply)

    # -- controls ------------------------------------------------------------------------

    def terminate_containers(self, pod: Obj) -> None:
        """Argo's TerminateContainers: SIGTERM, SIGKILL after the pod's grace."""
        run = self.runs.get(meta(pod)["uid"])
        if run is None:
            return
        grace = float((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        for container in run.containers.values():
            container.stop(self.store.clock.time(), grace, self.store.clock.stamp())

    def kill_node(self, node: str) -> None:
        """The node is lost: its containers die at once and its kubelet stops reporting."""
        self.down_nodes.add(node)
        for uid, run in list(self.runs.items()):
            if run.node == node:
                self._discard(uid)

    def _discard(self, uid: str) -> None:
        with self._lock:
            run = self.runs.pop(uid, None)
        if run is None:
            return
        for container in run.containers.values():
            container.signal(9)
            if container.popen is not None:
                container.popen.wait()
        shutil.rmtree(run.directory, ignore_errors=True)

    def shutdown(self) -> None:
        """Kill every container (the simulator stops)."""
        for uid in list(self.runs):
            self._discard(uid)

    # -- logs ----------------------------------------------------------------------------

    def _log_file(self, pod: Obj, container: str | None, previous: bool) -> Path | None:
        spec, name = pod.get("spec") or {}, meta(pod)["name"]
        names = [c["name"] for c in spec.get("containers") or []]
        init = [c["name"] for c in spec.get("initContainers") or []]
        if container is None:
            if len(names) != 1:
                raise status.bad_request(
                    f"a container name must be specified for pod {name}, "
                    f"choose one of: [{' '.join(names)}] or one of the init "
                    f"containers: [{' '.join(init)}]"
                )
            container = names[0]
        if container not in names and container not in init:
            raise status.bad_request(f"container {container} is not valid for pod {name}")
        if previous:
            raise status.bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        run = self.runs.get(meta(pod)["uid"])
        if container in init and run is not None:
            return None
        if run is None or container not in run.containers:
            if not spec.get("nodeName"):
                raise status.bad_request(f"pod {name} does not have a host assigned")
            raise status.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        return run.containers[container].log_path

    def read_log(
        self, pod: Obj, container: str | None, tail: int | None, limit: int | None, previous: bool
    ) -> bytes:
        """A container's log (its last `tail` lines, at most `limit` bytes)."""
        path = self._log_file(pod, container, previous)
        data = path.read_bytes() if path is not None and path.exists() else b""
        if tail is not None:
            data = b"".join(data.splitlines(keepends=True)[-tail:] if tail else [])
        return data[:limit] if limit is not None else data

    def follow_log(self, pod: Obj, container: str | None, tail: int | None) -> Iterator[bytes]:
        """A container's log as it grows, until the container ends."""
        data = self.read_log(pod, container, tail, None, False)
        path = self._log_file(pod, container, False)
        run = self.runs.get(meta(pod)["uid"])
        name = container or (pod["spec"]["containers"][0]["name"])
        yield data
        offset = path.stat().st_size if path is not None and path.exists() else 0
        while run is not None and path is not None and not self.store.closed:
            running = run.containers[name].running and run.uid in self.runs
            try:
                with path.open("rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
            except OSError:
                return
            offset += len(chunk)
            if chunk:
                yield chunk
            elif not running:
                return
            else:
                time.sleep(0.05)
