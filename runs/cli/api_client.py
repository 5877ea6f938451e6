"""The HTTP side of `simrun`: the service's API with a bearer token (SIMRUN_URL, SIMRUN_TOKEN).

`ApiLab` is what the commands call when SIMRUN_URL is set. Sources are sent as snapshots:
uploaded as a tar.gz (built in a temporary file, streamed), or, when the run store is mounted
here (SIMRUN_STORE), written into the store directly and only registered with the API. Events
are read from the run's server-sent event stream, reconnecting with `Last-Event-ID` whenever
the service ends a stream, so a follower sees every state once.

No Django here: the module runs wherever the command does.
"""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from runs.cli.service_http import ServiceRefused
from runs.cli.service_http import with_task_totals as _with_task_totals
from runs.snapshots import SKIPPED_DIRS, git_provenance, snapshot_directory
from simrun_harness.layout import StorePaths

END_EVENTS = frozenset({"end", "deleted"})


ApiError = ServiceRefused  # an answer of the API that is not a success


@dataclass(frozen=True)
class ServerEvent:
    """One event of a run's stream: `state`, `progress`, `end` or `deleted`."""

    kind: str
    data: dict[str, Any]
    id: str | None = None


@dataclass
class _EventParser:
    """Server-sent events from lines (the text/event-stream format)."""

    kind: str = "message"
    data: list[str] = field(default_factory=list)
    id: str | None = None

    def feed(self, line: str) -> ServerEvent | None:
        if not line:
            if not self.data:
                return None
            text = "\n".join(self.data)
            event = ServerEvent(self.kind, json.loads(text) if text else {}, self.id)
            self.kind, self.data, self.id = "message", [], None
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self.kind = value
        elif name == "data":
            self.data.append(value)
        elif name == "id":
            self.id = value
        return None


def _raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        detail, code = str(body.get("detail", "")), str(body.get("code", ""))
        raise ApiError(response.status_code, detail, code, body)
    raise ApiError(response.status_code, response.text[:500] or response.reason_phrase)


class ApiLab:
    """The lab as the API shows it to one token."""

    UNREACHABLE: tuple[type[Exception], ...] = (httpx.TransportError,)
    """Errors of a service that is down or unreachable: following a run waits them out."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        store: Path | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.store = StorePaths(store) if store is not None else None
        self.http = httpx.Client(
            base_url=url.rstrip("/") + "/api/",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> ApiLab:
        """From SIMRUN_URL, SIMRUN_TOKEN and (when the store is mounted here) SIMRUN_STORE."""
        env = os.environ if env is None else env
        url, token = env.get("SIMRUN_URL", ""), env.get("SIMRUN_TOKEN", "")
        if not url or not token:
            raise ApiError(0, "set SIMRUN_URL and SIMRUN_TOKEN to use the service's API")
        store = env.get("SIMRUN_STORE") or None
        return cls(url, token, store=Path(store) if store else None)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ApiLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        _raise_for(response)
        return response.json() if response.content else None

    # -- runs -------------------------------------------------------------------------------

    def submit(
        self,
        workflow_text: str,
        sources: Sequence[Path],
        group: str = "",
        *,
        follow: bool = False,
        split: str | int | None = None,
        reserve: str | None = None,
        idempotency_key: str | None = None,
        on_event: Callable[[ServerEvent], None] | None = None,
        reuse: bool = True,
        resume_from: str | None = None,
    ) -> dict[str, Any]:
        """Snapshot the sources (the model first), submit, and return the run; with `follow`
        wait for its end (passing each event to `on_event`) and return it ended."""
        digests = [self.upload_snapshot(source) for source in sources]
        run = self.create_run(
            workflow_text,
            digests,
            group,
            split=split,
            reserve=reserve,
            idempotency_key=idempotency_key,
            reuse=reuse,
            resume_from=resume_from,
        )
        if follow:
            return self.wait(run["id"], on_event=on_event)
        return run

    def create_run(
        self,
        workflow_text: str,
        digests: Sequence[str],
        group: str = "",
        *,
        split: str | int | None = None,
        reserve: str | None = None,
        idempotency_key: str | None = None,
        reuse: bool = True,
        resume_from: str | None = None,
    ) -> dict[str, Any]:
        """Submit a run of snapshots the service has already (their digests)."""
        body: dict[str, Any] = {"workflow": workflow_text, "sources": list(digests), "group": group}
        if split is not None:
            body["split"] = str(split)
        if reserve:
            body["reserve"] = reserve
        if not reuse:
            body["reuse"] = False
        if resume_from:
            body["resume_from"] = resume_from
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return _with_task_totals(self._call("POST", "runs/", json=body, headers=headers))

    def validate(self, workflow_text: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "validate/", json={"workflow": workflow_text})
        return result

    def estimate(self, workflow_text: str, sources: Sequence[str] = ()) -> list[dict[str, Any]]:
        body = {"workflow": workflow_text, "sources": list(sources)}
        result: list[dict[str, Any]] = self._call("POST", "estimate/", json=body)
        return result

    def runs(
        self,
        *,
        state: str | None = None,
        group: str | None = None,
        owner: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Up to `limit` runs, newest first, following the pages."""
        params: dict[str, Any] = {
            k: v for k, v in {"state": state, "group": group, "owner": owner}.items() if v
        }
        found: list[dict[str, Any]] = []
        while len(found) < limit:
            params["limit"] = min(200, limit - len(found))
            page = self._call("GET", "runs/", params=params)
            found.extend(page["runs"])
            if not page["next_cursor"]:
                break
            params["cursor"] = page["next_cursor"]
        return found

    def show(self, run_id: str) -> dict[str, Any]:
        """The run with its tasks (each also with `id`, `done` and `total` for progress bars)."""
        return _with_task_totals(self._call("GET", f"runs/{run_id}/"))

    def cancel(self, run_id: str) -> dict[str, Any]:
        return _with_task_totals(self._call("POST", f"runs/{run_id}/cancel/"))

    def delete(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"runs/{run_id}/")
        return result

    def tasks(self, run_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", f"runs/{run_id}/tasks/")
        return result

    def workers(self, run_id: str, task_id: str | None = None) -> list[dict[str, Any]]:
        params = {"task": task_id} if task_id else {}
        result: list[dict[str, Any]] = self._call("GET", f"runs/{run_id}/workers/", params=params)
        return result

    def outputs(self, run_id: str) -> list[str]:
        """The paths of the run's output files, relative to the store."""
        return [f["path"] for f in self.output_files(run_id)]

    def output_files(self, run_id: str, task_id: str | None = None) -> list[dict[str, Any]]:
        """The output files with their task, size and time (of one task when given)."""
        params = {"task": task_id} if task_id else {}
        listing = self._call("GET", f"runs/{run_id}/outputs/", params=params)
        files: list[dict[str, Any]] = listing["files"]
        return files

    def download(self, run_id: str, path: str, target: Path) -> Path:
        """Write one output file (a path as `outputs` lists it) to `target`, streamed."""
        url = f"runs/{run_id}/outputs/download/"
        with self.http.stream("GET", url, params={"path": path}) as response:
            if not response.is_success:
                response.read()
                _raise_for(response)
            with target.open("wb") as out:
                for chunk in response.iter_bytes():
                    out.write(chunk)
        return target

    def export(self, run_id: str, target: Path, *, metadata_only: bool = False) -> Path:
        """The run's RO-Crate, streamed into `target`: a zip when its name ends in .zip, else
        unpacked (with the checks of uploads) into a new directory."""
        params = {"metadata_only": "true"} if metadata_only else {}
        zipped = (
            target if target.suffix.lower() == ".zip" else target.with_name(f".{target.name}.zip")
        )
        partial = zipped.with_name(f".{zipped.name}.part")
        with self.http.stream("GET", f"runs/{run_id}/crate/", params=params) as response:
            if not response.is_success:
                response.read()
                _raise_for(response)
            with partial.open("wb") as out:
                for chunk in response.iter_bytes():
                    out.write(chunk)
        partial.replace(zipped)
        if zipped == target:
            return target
        from runs.services.crate_archives import unpack_crate
        from runs.services.uploads import UploadLimits

        size = zipped.stat().st_size
        try:
            unpack_crate(zipped, target, UploadLimits(size, 100_000, 64 * 1024**3))
        finally:
            zipped.unlink(missing_ok=True)
        return target

    def logs(self, run_id: str, task_id: str, *, tail: int | None = None) -> str:
        """The logs of a task's pods, every attempt under a `==> pod-attempt <==` header."""
        params: dict[str, Any] = {"task": task_id}
        if tail:
            params["tail"] = tail
        parts = [
            f"==> {e['pod']}-{e['attempt']} <==\n"
            + (e["text"] if e["error"] is None else f"[{e['error']}]\n")
            for e in self._call("GET", f"runs/{run_id}/logs/", params=params)
        ]
        return "\n".join(parts)

    def follow_logs(self, run_id: str, task_id: str, *, tail: int | None = None) -> Iterator[str]:
        """New lines of a task's logs as they come (`[pod#attempt] line`), until it ends or
        the service ends the stream."""
        params: dict[str, Any] = {"task": task_id, "follow": "true"}
        if tail:
            params["tail"] = tail
        with self.http.stream(
            "GET",
            f"runs/{run_id}/logs/",
            params=params,
            headers={"Accept": "text/plain"},
            timeout=httpx.Timeout(self.http.timeout.connect, read=None),
        ) as response:
            if not response.is_success:
                response.read()
                _raise_for(response)
            yield from response.iter_lines()

    # -- events -----------------------------------------------------------------------------

    def events(self, run_id: str, *, last_event_id: str | None = None) -> Iterator[ServerEvent]:
        """The events of one connection to the run's stream (it ends when the service ends it)."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        timeout = httpx.Timeout(self.http.timeout.connect, read=None)
        with self.http.stream(
            "GET", f"runs/{run_id}/events/", headers=headers, timeout=timeout
        ) as response:
            if not response.is_success:
                response.read()
                _raise_for(response)
            parser = _EventParser()
            for line in response.iter_lines():
                event = parser.feed(line)
                if event is not None:
                    yield event

    def follow(self, run_id: str, *, last_event_id: str | None = None) -> Iterator[ServerEvent]:
        """Every event of a run until it ends, reconnecting where the last stream stopped."""
        last = last_event_id
        while True:
            for event in self.events(run_id, last_event_id=last):
                if event.id is not None:
                    last = event.id
                yield event
                if event.kind in END_EVENTS:
                    return

    def wait(
        self, run_id: str, *, on_event: Callable[[ServerEvent], None] | None = None
    ) -> dict[str, Any]:
        """Follow a run to its end; the ended run."""
        for event in self.follow(run_id):
            if on_event is not None:
                on_event(event)
        return self.show(run_id)

    # -- snapshots --------------------------------------------------------------------------

    def upload_snapshot(self, directory: Path) -> str:
        """The digest of a snapshot of `directory`: written into the mounted store and
        registered, else uploaded as a tar.gz."""
        directory = directory.resolve()
        if not directory.is_dir():
            raise ApiError(0, f"{directory}: not a directory")
        provenance = git_provenance(directory)
        meta = {
            "name": directory.name,
            "source_path": provenance.source_path,
            "git_remote": provenance.git_remote,
            "git_commit": provenance.git_commit,
        }
        if provenance.git_dirty is not None:
            meta["git_dirty"] = "true" if provenance.git_dirty else "false"
        if self.store is not None:
            info = snapshot_directory(self.store, directory)
            registered = {**meta, "digest": info.digest, "git_dirty": provenance.git_dirty}
            self.register_snapshot(registered)
            return info.digest
        with tempfile.TemporaryFile() as archive:
            _write_tar_gz(directory, archive)
            archive.seek(0)
            snapshot = self._call(
                "POST",
                "snapshots/",
                params=meta,
                content=archive,
                headers={"Content-Type": "application/gzip"},
            )
        digest: str = snapshot["digest"]
        return digest

    def register_snapshot(self, meta: Mapping[str, Any]) -> None:
        """Record a snapshot written into the mounted store (its digest and provenance)."""
        self._call("POST", "snapshots/register/", json=dict(meta))


def _write_tar_gz(directory: Path, out: Any) -> None:
    """A tar.gz of the sources below `directory`, as a local snapshot would take them."""

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if any(part in SKIPPED_DIRS for part in info.name.split("/")):
            return None
        if not (info.isfile() or info.isdir() or info.issym()):
            return None  # sockets, fifos and devices are not sources
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name in sorted(os.listdir(directory)):
            if name not in SKIPPED_DIRS:
                archive.add(directory / name, arcname=name, filter=keep)
