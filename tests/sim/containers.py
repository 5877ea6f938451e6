"""A container of the simulated kubelet: a local process group, or a simulated stand-in.

A container with a command runs as a local process in its own session (`start_new_session`:
its process group is the container, so a signal or a kill reaches every process it
started, as the kernel kills a whole cgroup with `memory.oom.group`; seed 003 K6). The image
is ignored: the process runs in the current Python environment (its `bin` directory first on
PATH). Argo's `argoexec emissary --` prefix is dropped. Its environment is this process's
plus the container's `env` and `envFrom`, with `valueFrom.fieldRef` (`metadata.name`,
`metadata.namespace`, `metadata.uid`, `spec.nodeName`, `status.podIP`, labels and
annotations), `resourceFieldRef`, and ConfigMap/Secret keys resolved, and `$(VAR)` expanded.
Its output goes to a log file that lives as long as the pod.

Volumes: a volume mapped in `volume_dirs` (by volume name, claim name or hostPath) is a
local directory; the container's mount path of it (with `subPath`) is translated in its
env values, arguments and working directory (a value equal to the mount path or below it
is rewritten to the local directory), and the directory is created. Unmapped mounts are
left as written: the simulator expects such paths to be real local paths.

Stand-ins: Argo's `wait` container (runs while the others run, ends 0), a container without
a command (a placeholder, e.g. a DaemonSet's pause container; ends when stopped) and
`buildctl` (the simulated BuildKit of `tests.sim.buildkit`).

Exit codes as a container runtime reports them: the process's code, 128+N for a signal N;
reason `Completed` for 0, `OOMKilled` (137) after a kill for memory, `Error` otherwise.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.sim.quantities import quantity
from tests.sim.resources import CONFIGMAPS, SECRETS
from tests.sim.selectors import field_value
from tests.sim.store import Obj, Store, meta

EMISSARY = ("argoexec", "emissary")
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass
class Container:
    """One running (or finished) container."""

    name: str
    kind: str  # process, wait, idle, simulated
    log_path: Path
    started_at: str
    popen: subprocess.Popen[bytes] | None = None
    memory_limit: int | None = None
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    finished_at: str = ""
    kill_at: float | None = None
    oom: bool = False
    cgroup: CgroupFiles | None = None
    finish_at: float | None = None  # a simulated container's end
    outcome: tuple[int, str] = (0, "")

    @property
    def running(self) -> bool:
        return self.exit_code is None

    def finish(self, code: int, stamp: str, reason: str = "", message: str = "") -> None:
        """Record the container's end."""
        self.exit_code = code
        self.reason = reason or ("Completed" if code == 0 else "Error")
        self.message = message
        self.finished_at = stamp

    def signal(self, sig: int) -> None:
        """Send a signal to the container's whole process group."""
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, sig)

    def stop(self, now: float, grace: float, stamp: str) -> None:
        """SIGTERM now, SIGKILL when the grace has passed (`poll` does that)."""
        if not self.running or self.kill_at is not None or self.kind == "wait":
            return  # Argo's wait container ends with the others
        if self.kind == "process":
            self.signal(signal.SIGTERM)
            self.kill_at = now + grace
        elif self.kind == "simulated":
            self.finish(143, stamp)
        else:
            self.finish(0, stamp)

    def poll(self, now: float, stamp: str) -> bool:
        """Notice an end; kill after the grace. True when the container ended now."""
        if not self.running:
            return False
        if self.kind == "simulated":
            if self.finish_at is not None and now >= self.finish_at:
                outcome_code, message = self.outcome
                self.finish(outcome_code, stamp, message=message)
                return True
            return False
        if self.popen is None:
            return False
        code = self.popen.poll()
        if code is None:
            if self.kill_at is not None and now >= self.kill_at:
                self.signal(signal.SIGKILL)
            return False
        self.signal(signal.SIGKILL)  # what is left of the group goes with its main process
        if self.oom:
            self.finish(137, stamp, "OOMKilled")
        else:
            self.finish(128 - code if code < 0 else code, stamp)
        return True

    def enforce_memory(self, used: int, processes: int = 1) -> bool:
        """Kill the whole group when `used` exceeds its limit (`processes` of them, counted
        in its `memory.events`); True when it did."""
        if self.memory_limit is None or not self.running or self.oom:
            return False
        if used > self.memory_limit:
            self.oom = True
            self.signal(signal.SIGKILL)
            if self.cgroup is not None:
                self.cgroup.count_group_kill(processes)
            return True
        return False

    def kill_largest(self, used: int) -> bool:
        """Over its limit, kill only the largest process of the group (the kubelet's
        `singleProcessOOMKill`); the container goes on unless that was its main process."""
        if self.memory_limit is None or not self.running or self.oom or self.popen is None:
            return False
        if used <= self.memory_limit:
            return False
        sizes = {pid: _rss(pid) for pid in _tree(self.popen.pid)}
        victim = max(sizes, key=lambda pid: (sizes[pid], -pid))
        self.oom = victim == self.popen.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(victim, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.count_kill()
        return True


MEMORY_EVENTS = ("low", "high", "max", "oom", "oom_kill", "oom_group_kill")


@dataclass
class CgroupFiles:
    """A container's cgroup v2 memory files, as a process inside it reads /sys/fs/cgroup.

    The simulated containers share the test process's real cgroup, so each gets a directory
    of its own: `memory.max` (its limit, or `max`) and `memory.events` (the kills for
    memory the simulated kernel made). The harness reads it where `SIMRUN_CGROUP_ROOT` points.
    """

    root: Path
    events: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MEMORY_EVENTS, 0))

    @classmethod
    def create(cls, root: Path, memory_limit: int | None) -> CgroupFiles:
        root.mkdir(parents=True, exist_ok=True)
        (root / "memory.max").write_text(f"{memory_limit if memory_limit else 'max'}\n")
        files = cls(root)
        files.write()
        return files

    def write(self) -> None:
        """Replace memory.events atomically (a reader never sees half a file)."""
        text = "".join(f"{key} {value}\n" for key, value in self.events.items())
        temporary = self.root / ".memory.events"
        temporary.write_text(text)
        temporary.replace(self.root / "memory.events")

    def count_kill(self) -> None:
        """The kernel killed one process of the group."""
        for key in ("max", "oom", "oom_kill"):
            self.events[key] += 1
        self.write()

    def count_group_kill(self, processes: int) -> None:
        """The kernel killed the whole group (`memory.oom.group`): `processes` kills."""
        for key in ("max", "oom", "oom_group_kill"):
            self.events[key] += 1
        self.events["oom_kill"] += max(1, processes)
        self.write()


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    """The children of a process, from /proc (psutil's scan of every process as fallback)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        found: list[int] = []
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(c) for c in handle.read().split())
        return found
    except FileNotFoundError:
        with contextlib.suppress(psutil.Error):
            return [c.pid for c in psutil.Process(pid).children()]
        return []
    except OSError:
        return []


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _tree(root: int) -> list[int]:
    """A process and its descendants."""
    stack, seen = [root], []
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.append(pid)
            stack.extend(_children(pid))
    return seen


def tree_memory(roots: list[int]) -> dict[int, tuple[int, int]]:
    """The resident memory of each root's process tree, in bytes, and its processes."""
    used = {}
    for root in roots:
        total, stack, seen = 0, [root], set()
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            total += _rss(pid)
            stack.extend(_children(pid))
        used[root] = (total, len(seen))
    return used


@dataclass
class Launch:
    """Everything needed to start a container's process."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    extra: dict[str, Any] = field(default_factory=dict)


def _lookup(store: Store, pod: Obj, ref: Mapping[str, Any], secret: bool) -> str | None:
    info = SECRETS if secret else CONFIGMAPS
    found = store.find(info, meta(pod)["namespace"], ref.get("name", ""))
    if found is None:
        return None
    if secret:
        data = (found.get("data") or {}).get(ref.get("key", ""))
        return base64.b64decode(data).decode() if data is not None else None
    return (found.get("data") or {}).get(ref.get("key", ""))


def _field(pod: Obj, path: str) -> str:
    match = re.match(r"^metadata\.(labels|annotations)\['(.+)'\]$", path)
    if match:
        return (meta(pod).get(match.group(1)) or {}).get(match.group(2), "")
    if path in ("status.podIP", "status.hostIP"):
        return "127.0.0.1"
    return field_value(pod, path)


def _resource(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    kind, _, name = ref.get("resource", "").partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if value is None:
        return "0"
    amount = quantity(value) / quantity(ref.get("divisor", "1"))
    return str(int(-(-amount // 1)))  # rounded up, as the kubelet does


def expand(text: str, env: Mapping[str, str]) -> str:
    """`$(VAR)` references replaced by their values (unknown ones left as written)."""
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def container_env(store: Store, pod: Obj, container: Mapping[str, Any]) -> dict[str, str]:
    """The variables a container declares (`env`, `envFrom`), resolved."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        ref = source.get("configMapRef") or source.get("secretRef") or {}
        found = store.find(
            SECRETS if "secretRef" in source else CONFIGMAPS,
            meta(pod)["namespace"],
            ref.get("name", ""),
        )
        for key, data in ((found or {}).get("data") or {}).items():
            decoded = base64.b64decode(data).decode() if "secretRef" in source else data
            env[source.get("prefix", "") + key] = decoded
    for item in container.get("env") or []:
        source = item.get("valueFrom") or {}
        value: str | None
        if "value" in item:
            value = expand(str(item["value"]), env)
        elif "fieldRef" in source:
            value = _field(pod, source["fieldRef"].get("fieldPath", ""))
        elif "resourceFieldRef" in source:
            value = _resource(container, source["resourceFieldRef"])
        elif "configMapKeyRef" in source or "secretKeyRef" in source:
            secret = "secretKeyRef" in source
            value = _lookup(
                store, pod, source["secretKeyRef" if secret else "configMapKeyRef"], secret
            )
        else:
            value = ""
        if value is not None:
            env[item["name"]] = value
    return env


def mount_map(
    pod: Obj, container: Mapping[str, Any], volume_dirs: Mapping[str, Path]
) -> list[tuple[str, Path]]:
    """(mount path, local directory) of a container's mapped volumes, longest path first."""
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    mapped = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount.get("name")) or {}
        keys = [
            volume.get("name"),
            (volume.get("persistentVolumeClaim") or {}).get("claimName"),
            (volume.get("hostPath") or {}).get("path"),
        ]
        base = next((volume_dirs[k] for k in keys if k and k in volume_dirs), None)
        if base is not None:
            local = base / mount["subPath"] if mount.get("subPath") else base
            mapped.append((mount["mountPath"].rstrip("/") or "/", local))
    return sorted(mapped, key=lambda m: -len(m[0]))


def translate(value: str, mounts: list[tuple[str, Path]]) -> str:
    """A path in the container's view as the local path of its mapped volume."""
    for mount_path, local in mounts:
        if value == mount_path or value.startswith(mount_path + "/"):
            return str(local) + value[len(mount_path) :]
    return value


def launch(
    store: Store,
    pod: Obj,
    container: Mapping[str, Any],
    volume_dirs: Mapping[str, Path],
    pod_dir: Path,
) -> Launch:
    """The argv, environment and directory of a container's process."""
    mounts = mount_map(pod, container, volume_dirs)
    for _, local in mounts:
        local.mkdir(parents=True, exist_ok=True)
    declared = container_env(store, pod, container)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOSTNAME": meta(pod)["name"],
        **{k: translate(v, mounts) for k, v in declared.items()},
    }
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if len(argv) >= 3 and argv[0].endswith(EMISSARY[0]) and argv[1] == EMISSARY[1]:
        argv = argv[argv.index("--") + 1 :] if "--" in argv else argv[2:]
    argv = [translate(expand(a, env), mounts) for a in argv]
    cwd = Path(translate(container.get("workingDir") or "", mounts) or pod_dir)
    return Launch(argv, env, cwd if cwd.is_dir() else pod_dir)


def start_process(run: Launch, log_path: Path) -> subprocess.Popen[bytes]:
    """Start a container's process in its own session, its output appended to its log."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            run.argv,
            env=run.env,
            cwd=run.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


Simulate = Callable[[Obj, Launch], tuple[int, str, float | None]]
