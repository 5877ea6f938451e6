"""The commands' lab over HTTP to this machine's running service, worded as the direct one.

`ServiceLab` answers `submit`, `runs`, `show`, `follow` and `cancel` through the service's API
with the token `serve` keeps for them (`runs/cli/local_service.py`), so those commands set no
Django up. Its refusals are the same lines and exit codes as `DirectLab`'s. A service that
takes no connection (its web process restarting, say) or refuses the token makes it say so
once on stderr and go on with `DirectLab`: nothing had been done that a retry would repeat
(snapshots are stored by content, and the run is made by one request).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from runs.cli.base import CommandError, setup_django
from runs.cli.local_service import LocalService
from runs.cli.service_http import (
    ServiceDown,
    ServiceHttp,
    ServiceLost,
    ServiceRefused,
    with_task_totals,
)

T = TypeVar("T")


class ServiceLab:
    """Submit, list, show and cancel runs through the running service."""

    UNREACHABLE: tuple[type[Exception], ...] = ()  # a service that is down: the direct lab

    def __init__(self, service: LocalService) -> None:
        self.service = service
        self.http = ServiceHttp(service.url, service.token)
        self._direct: Any = None

    def _fallback(self, why: str | None) -> Any:
        """The direct lab from now on; `why` the service failed us (said once), if it did."""
        if self._direct is None:
            if why is not None:
                print(
                    f"simrun: the service at {self.service.url} {why}; "
                    "working on this machine's database directly",
                    file=sys.stderr,
                    flush=True,
                )
            setup_django()
            from runs.cli.direct_lab import DirectLab

            self._direct = DirectLab()
        return self._direct

    def _either(self, over_http: Callable[[], T], direct: Callable[[Any], T]) -> T:
        """`over_http()` while the service serves us, else `direct(the direct lab)`."""
        if self._direct is None:
            try:
                return over_http()
            except ServiceDown as exc:
                self._fallback(f"does not answer ({exc})")
            except ServiceRefused as exc:
                if exc.status != 401:
                    raise _as_command_error(exc) from None
                self._fallback(f"refuses this machine's token ({exc.detail})")
            except ServiceLost as exc:
                # the request may have been acted on: not repeated the direct way
                raise CommandError(
                    f"the service at {self.service.url} broke off ({exc}); "
                    "`simrun runs` shows what it did"
                ) from None
        return direct(self._direct)

    # -- the verbs ---------------------------------------------------------------------------

    def submit(
        self,
        *,
        workflow_text: str,
        sources: list[Path],
        group: str,
        reuse: bool = True,
        resume_from: str | None = None,
    ) -> dict[str, Any]:
        def over_http() -> dict[str, Any]:
            try:
                digests = [self._snapshot(source) for source in sources]
            except CommandError as refused:
                # the direct way reads the workflow first: its errors come before the sources'
                raise (_invalid_as_written(workflow_text) or refused) from None
            body: dict[str, Any] = {"workflow": workflow_text, "sources": digests, "group": group}
            if not reuse:
                body["reuse"] = False
            if resume_from:
                body["resume_from"] = resume_from
            try:
                return with_task_totals(self.http.call("POST", "runs/", body=body))
            except ServiceRefused as exc:
                if exc.code == "workflow_invalid":
                    raise _workflow_refusal(workflow_text, exc) from None
                raise

        return self._either(
            over_http,
            lambda d: d.submit(
                workflow_text=workflow_text,
                sources=sources,
                group=group,
                reuse=reuse,
                resume_from=resume_from,
            ),
        )

    def runs(self, *, limit: int = 20) -> list[dict[str, Any]]:
        def over_http() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            params: dict[str, Any] = {}
            while len(found) < limit:
                params["limit"] = min(200, limit - len(found))  # the API's pages, followed
                page = self.http.call("GET", "runs/", params=params)
                found.extend(page["runs"])
                if not page["next_cursor"]:
                    break
                params["cursor"] = page["next_cursor"]
            return found

        return self._either(over_http, lambda d: d.runs(limit=limit))

    def show(self, run_id: str) -> dict[str, Any]:
        return self._either(
            lambda: with_task_totals(self.http.call("GET", f"runs/{_quoted(run_id)}/")),
            lambda d: d.show(run_id),
        )

    def cancel(self, run_id: str) -> dict[str, Any]:
        return self._either(
            lambda: with_task_totals(self.http.call("POST", f"runs/{_quoted(run_id)}/cancel/")),
            lambda d: d.cancel(run_id),
        )

    def logs(self, run_id: str, task_id: str, *, tail: int | None = None) -> str:
        text: str = self._fallback(None).logs(run_id, task_id, tail=tail)  # kept files first
        return text

    def outputs(self, run_id: str) -> list[str]:
        found: list[str] = self._fallback(None).outputs(run_id)
        return found

    def _snapshot(self, source: Path) -> str:
        """The digest of a source's snapshot, written into the service's store (as the direct
        way does) and registered with the service."""
        from runs.snapshots import SnapshotRefused, snapshot_directory
        from simrun_harness.layout import StorePaths

        try:
            info = snapshot_directory(StorePaths(self.service.store), source)
        except SnapshotRefused as exc:
            raise CommandError(f"--source {source}: {exc}") from None
        provenance = info.provenance
        registered = {
            "digest": info.digest,
            "name": source.resolve().name,
            "source_path": provenance.source_path,
            "git_remote": provenance.git_remote,
            "git_commit": provenance.git_commit,
            "git_dirty": provenance.git_dirty,
        }
        try:
            self.http.call("POST", "snapshots/register/", body=registered)
        except ServiceRefused as exc:
            if exc.status == 401:
                raise
            raise CommandError(f"--source {source}: {exc.detail}") from None
        return info.digest


def _quoted(run_id: str) -> str:
    from urllib.parse import quote

    return quote(run_id, safe="")


def _invalid_as_written(workflow_text: str) -> CommandError | None:
    """The direct way's words for a workflow invalid as written (found here by the same
    code), or None when it is valid."""
    from runs.validation import load
    from runs.workflow import WorkflowInvalid

    try:
        load(workflow_text)
    except WorkflowInvalid as invalid:
        lines = [f"line {e.line}: {e}" if e.line else str(e) for e in invalid.errors]
        return CommandError("the workflow is invalid:\n" + "\n".join(lines))
    return None


def _workflow_refusal(workflow_text: str, exc: ServiceRefused) -> CommandError:
    """The direct way's words for a workflow the service refused: invalid as written, or
    refused by its plugins when the run was made."""
    texts = [str(error.get("text", "")) for error in exc.errors]
    return _invalid_as_written(workflow_text) or CommandError(
        "the workflow cannot run:\n" + "\n".join(texts)
    )


def _as_command_error(exc: ServiceRefused) -> Exception:
    """A refusal of the service as the direct way words it (the domain's own message)."""
    if exc.status in (400, 403, 404, 409):
        return CommandError(exc.detail)
    return CommandError(f"the service answered {exc.status}: {exc.detail}")
