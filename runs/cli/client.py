"""The command line's one client of simrun: the API over HTTP, on the standard library only.

The same code talks to a remote service (SIMRUN_URL and SIMRUN_TOKEN) and to this machine's
`simrun serve`, found by its state file and reached with the owner's token that serve keeps in
the data directory (`cli_token`, 0600; SIMRUN_TOKEN, if set, is sent instead). With no serve
running, `connect` starts one in the background and says so in one line, or, with
SIMRUN_AUTOSTART=false, refuses naming the command that starts it. No Django here: a command
that talks to the service starts in a fraction of a second.

Sources become snapshots written into the run store when it is visible here (the local
service's, or SIMRUN_STORE) and registered; otherwise they are uploaded as a tar.gz.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any, Protocol

from runs.cli.base import CommandError
from runs.states import TaskState

AUTOSTART = "SIMRUN_AUTOSTART"
BLOCK = 256 * 1024
SERVE_COMMAND = "simrun serve"


class Readable(Protocol):
    """A body sent as it is read (a file, or one counted while it is read)."""

    def read(self, size: int = -1, /) -> bytes: ...


class ApiError(Exception):
    """An answer of the API that is not a success: its status, detail, code and body."""

    def __init__(self, status: int, detail: str, code: str = "", body: Any = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.code, self.body = status, detail, code, body

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The workflow's errors of a refused submission (loc, line, text)."""
        return list(self.body.get("errors", [])) if isinstance(self.body, dict) else []

    def report(self) -> str:
        """What a command prints: the domain's words, each workflow error at its line."""
        if self.errors:
            refused = self.code == "workflow_refused"
            head = "the workflow text is refused:" if refused else "the workflow is invalid:"
            lines = [
                f"line {e['line']}: {e['text']}" if e["line"] else e["text"] for e in self.errors
            ]
            return "\n".join([head, *lines])
        if self.status == 401:
            return (
                f"the token is refused ({self.detail}): check SIMRUN_TOKEN, or restart "
                f"`{SERVE_COMMAND}` to renew this machine's"
            )
        if self.status in (400, 403, 404, 409, 413, 415, 416):
            return self.detail
        return f"the service answered {self.status}: {self.detail}"


class Unreachable(Exception):
    """No answer: refused (nothing was sent) or broken off (the request may have arrived)."""

    def __init__(self, url: str, why: str, *, sent: bool) -> None:
        super().__init__(f"simrun at {url} {'broke off' if sent else 'does not answer'} ({why})")
        self.sent = sent


class Client:
    """The API under `url` as one token sees it; `store`: the run store, when mounted here."""

    def __init__(
        self, url: str, token: str, *, store: Path | None = None, timeout: float = 60.0
    ) -> None:
        self.url = url.rstrip("/") + "/"
        self.token, self.store, self.timeout = token, store, timeout

    def _open(
        self, method: str, path: str, params: dict[str, Any] | None = None, **how: Any
    ) -> Any:
        """The open response of a request; ApiError for an error answer, Unreachable else."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        url = self.url + "api/" + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        request = urllib.request.Request(
            url, data=how.get("data"), headers=headers | how.get("headers", {}), method=method
        )
        try:
            return urllib.request.urlopen(request, timeout=how.get("timeout", self.timeout))
        except urllib.error.HTTPError as error:
            raise _refusal(error.code, error.read()) from None
        except urllib.error.URLError as error:
            sent = not isinstance(error.reason, ConnectionRefusedError | FileNotFoundError)
            raise Unreachable(self.url, str(error.reason), sent=sent) from None
        except (OSError, http.client.HTTPException) as error:  # reset, timed out, cut short
            raise Unreachable(self.url, str(error) or type(error).__name__, sent=True) from None

    def call(
        self, method: str, path: str, *, body: Any = None, params: Any = None, **how: Any
    ) -> Any:
        """The decoded JSON answer of one request."""
        if body is not None:
            how["data"] = json.dumps(body).encode()
            how["headers"] = {"Content-Type": "application/json", **how.get("headers", {})}
        with self._open(method, path, params, **how) as response:
            try:
                content = response.read()
                return json.loads(content) if content else None
            except (OSError, http.client.HTTPException, ValueError) as error:
                raise Unreachable(self.url, f"an answer cut short: {error}", sent=True) from None

    # -- runs -------------------------------------------------------------------------------

    def submit(self, workflow_text: str, sources: Sequence[Path], **options: Any) -> Any:
        """Snapshot the sources (the model first) and submit; the run, `submitting`. Options:
        group, split, reserve, reuse, resume_from (as the API's body), idempotency_key."""
        key = options.pop("idempotency_key", None)
        body = {"workflow": workflow_text, "sources": [self.snapshot(s) for s in sources]}
        body |= {k: v for k, v in options.items() if v is not None}
        headers = {"Idempotency-Key": key} if key else {}
        return with_task_totals(self.call("POST", "runs/", body=body, headers=headers))

    def runs(self, *, limit: int = 20, **filters: str | None) -> list[Any]:
        """Up to `limit` runs, newest first (filters: state, group, owner), page after page."""
        found: list[Any] = []
        params: dict[str, Any] = dict(filters)
        while len(found) < limit:
            params["limit"] = min(200, limit - len(found))
            page = self.call("GET", "runs/", params=params)
            found += page["runs"]
            if not page["next_cursor"]:
                break
            params["cursor"] = page["next_cursor"]
        return found

    def show(self, run_id: str) -> Any:
        return with_task_totals(self.call("GET", f"runs/{_quoted(run_id)}/"))

    def cancel(self, run_id: str) -> Any:
        return with_task_totals(self.call("POST", f"runs/{_quoted(run_id)}/cancel/"))

    def outputs(self, run_id: str, task_id: str | None = None) -> list[Any]:
        """The run's output files (path relative to the store, task, size, modified)."""
        path = f"runs/{_quoted(run_id)}/outputs/"
        return list(self.call("GET", path, params={"task": task_id})["files"])

    def logs(self, run_id: str, task_id: str, *, tail: int | None = None) -> list[Any]:
        """The log of every attempt of the task's pods (pod, attempt, text, error, …)."""
        params = {"task": task_id, "tail": tail}
        return list(self.call("GET", f"runs/{_quoted(run_id)}/logs/", params=params))

    def follow_logs(self, run_id: str, task_id: str, *, tail: int | None = None) -> Iterator[str]:
        """New lines of the task's logs (`[pod#attempt] line`) until the service ends the
        stream (the task ended, or the stream's maximum time passed)."""
        params = {"task": task_id, "follow": "true", "tail": tail}
        path = f"runs/{_quoted(run_id)}/logs/"
        plain = {"Accept": "text/plain"}
        with self._open("GET", path, params, headers=plain, timeout=None) as response:
            for line in response:
                yield line.decode(errors="replace").rstrip("\n")

    def download(
        self, path: str, target: Path, *, moved: Callable[[int], None] | None = None, **params: Any
    ) -> Path:
        """The answer to GET `path` streamed into the file `target` (written aside first, then
        renamed into place, so a broken transfer leaves no partial file under its name);
        `moved` is told the bytes received so far after each block."""
        partial = target.with_name(f".{target.name}.part")
        try:
            with (
                self._open("GET", path, params, timeout=None) as response,
                partial.open("wb") as out,
            ):
                received = 0
                while block := response.read(BLOCK):
                    out.write(block)
                    received += len(block)
                    if moved is not None:
                        moved(received)
        except (OSError, http.client.HTTPException) as error:
            partial.unlink(missing_ok=True)
            raise Unreachable(self.url, f"a download cut short: {error}", sent=True) from None
        return partial.replace(target)

    def submit_crate(self, crate: Readable, size: int, **options: Any) -> Any:
        """Send a crate's zip (`size` bytes, read from `crate`) to be run again; the run,
        `submitting`. Options: group, reuse, resume_from (as the API's query)."""
        params = {k: v for k, v in options.items() if v is not None}
        if "reuse" in params:
            params["reuse"] = "true" if params["reuse"] else "false"
        headers = {"Content-Type": "application/zip", "Content-Length": str(size)}
        answer = self.call(
            "POST", "runs/from_crate/", params=params, data=crate, headers=headers, timeout=None
        )
        return with_task_totals(answer)

    def compare(self, run_ids: Sequence[str]) -> Any:
        return self.call("GET", "compare/", params={"runs": ",".join(run_ids)})

    def explain_reuse(
        self, workflow_text: str, sources: Sequence[Path], **options: Any
    ) -> dict[str, Any]:
        """What a submission now would reuse, per task, and why not more (reuse,
        resume_from as the API's body); submits nothing."""
        body = {"workflow": workflow_text, "sources": [self.snapshot(s) for s in sources]}
        body |= {k: v for k, v in options.items() if v is not None}
        answer: dict[str, Any] = self.call("POST", "explain-reuse/", body=body)
        return answer

    def estimate(self, workflow_text: str, sources: Sequence[Path]) -> list[Any]:
        body = {"workflow": workflow_text, "sources": [self.snapshot(s) for s in sources]}
        return list(self.call("POST", "estimate/", body=body))

    # -- snapshots --------------------------------------------------------------------------

    def snapshot(self, source: Path) -> str:
        """The digest of a snapshot of the directory `source`: written into the store and
        registered when the store is here, else uploaded as a tar.gz."""
        from runs.snapshots import SnapshotRefused, git_provenance, snapshot_directory
        from simrun_harness.layout import StorePaths

        directory = source.resolve()
        if not directory.is_dir():
            raise CommandError(f"--source {source}: not a directory")
        try:
            if self.store is not None:
                info = snapshot_directory(StorePaths(self.store), directory)
                provenance = asdict(info.provenance)
                registered = {"digest": info.digest, "name": directory.name, **provenance}
                self.call("POST", "snapshots/register/", body=registered)
                return info.digest
            provenance = asdict(git_provenance(directory))
        except SnapshotRefused as exc:
            raise CommandError(f"--source {source}: {exc}") from None
        meta = {k: v for k, v in provenance.items() if v is not None} | {"name": directory.name}
        if "git_dirty" in meta:
            meta["git_dirty"] = str(meta["git_dirty"]).lower()
        with tempfile.TemporaryFile() as archive:
            write_tar_gz(directory, archive)
            size = archive.tell()
            archive.seek(0)
            headers = {"Content-Type": "application/gzip", "Content-Length": str(size)}
            answer = self.call("POST", "snapshots/", params=meta, data=archive, headers=headers)
        return str(answer["digest"])


def write_tar_gz(directory: Path, out: IO[bytes]) -> None:
    """A tar.gz of the sources below `directory`, as a snapshot in the store would take them."""
    from runs.snapshots import SKIPPED_DIRS

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


def with_task_totals(run: dict[str, Any]) -> dict[str, Any]:
    """Add to each task `id`, `done` and `total` (units; 1 for a task without a ledger), what
    the progress bars read."""
    for task in run.get("tasks", []):
        counts = task.get("counts")
        task["id"] = task["task_id"]
        task["done"] = counts["done"] if counts else int(task["state"] == TaskState.DONE)
        task["total"] = counts["total"] if counts else 1
    return run


def _refusal(status: int, content: bytes) -> ApiError:
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return ApiError(status, content.decode(errors="replace")[:500])
    return ApiError(status, str(body.get("detail", "")), str(body.get("code", "")), body)


def _quoted(run_id: str) -> str:
    return urllib.parse.quote(run_id, safe="")


# -- which service -------------------------------------------------------------------------


def connect(env: Mapping[str, str] = os.environ) -> Client:
    """The client of SIMRUN_URL, else of this installation's `simrun serve` (started in the
    background when none runs, unless SIMRUN_AUTOSTART is false)."""
    token = env.get("SIMRUN_TOKEN", "")
    if env.get("SIMRUN_URL"):
        if not token:
            raise CommandError("SIMRUN_URL is set but SIMRUN_TOKEN is not: set the API's token")
        store = env.get("SIMRUN_STORE")
        return Client(env["SIMRUN_URL"], token, store=Path(store) if store else None)
    from runs.cli.service_state import TOKEN_FILE, read_state, read_token
    from simrun_site import installation

    folder = installation.find(Path.cwd())
    if folder is None:
        raise CommandError(installation.missing_message(Path.cwd()))
    record = read_state(folder)
    if record is None or not record.url or not record.alive():
        url = start_serve(
            folder, autostart=env.get("SIMRUN_AUTOSTART", "true"), port=env.get("SIMRUN_PORT")
        )
        record = read_state(folder)
    else:
        url = record.url
    token = token or read_token(folder) or ""
    if not token:
        raise CommandError(f"no {folder / TOKEN_FILE}: restart `{SERVE_COMMAND}`, which writes it")
    return Client(url, token, store=Path(record.store) if record and record.store else None)


def start_serve(folder: Path, *, autostart: str, port: str | None) -> str:
    """Start `simrun serve` for the data directory `folder` in the background, say so in one
    line, and return its URL once it answers; CommandError when `autostart` is false."""
    if autostart.strip().lower() in ("0", "false", "no", "off"):
        raise CommandError(
            f"simrun is not running here ({folder}): start it with `{SERVE_COMMAND}` "
            f"(or leave {AUTOSTART} unset to have commands start it)"
        )
    from runs.cli.serving import ROOT, Background

    port = port or "8000"
    if not port.isdigit():
        raise CommandError(f"SIMRUN_PORT={port!r} is not a port (a whole number to 65535)")
    served = Background.start(data_dir=folder, port=int(port), cwd=ROOT)
    print(
        f"simrun: started `{SERVE_COMMAND}` in the background for {folder} (log: "
        f"{served.log}; `simrun stop` stops it)",
        file=sys.stderr,
        flush=True,
    )
    return served.wait_serving()
