"""The `simrun` command's view of this machine's simrun: the database and the store directly."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

from runs.cli.base import CommandError
from runs.states import RunState, TaskState


def owner_identity() -> Any:
    """The lab's owner, made for you (named for this user) if there is none yet."""
    from runs.models import Identity, IdentityKind
    from runs.services.identities import create_identity

    owner = Identity.objects.filter(kind=IdentityKind.OWNER).first()
    return owner or create_identity(name=getpass.getuser(), kind=IdentityKind.OWNER)


def _identity() -> Any:
    """Who acts on this machine: SIMRUN_IDENTITY, else the owner (made for you if none)."""
    import os

    from runs.models import Identity

    name = os.environ.get("SIMRUN_IDENTITY")
    if name:
        found = Identity.objects.filter(name=name).first()
        if found is None:
            raise CommandError(f"SIMRUN_IDENTITY={name!r}: no such identity")
        return found
    return owner_identity()


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment else None


def _reuse(run: Any) -> dict[str, Any]:
    from runs.selectors.reuse import run_reuse

    view = run_reuse(run)
    return {"reused": view.reused, "units": view.units, "sources": view.sources, "text": view.text}


def run_view(run: Any) -> dict[str, Any]:
    """What `show` and `follow` print: the run and its tasks' progress."""
    from runs.selectors.disk import installation_disk
    from runs.selectors.heartbeat import controller_idle_s, late_after_s
    from runs.selectors.progress import run_progress, task_progress

    tasks = {t.task_id: t for t in run.tasks.all()}
    progress = [task_progress(t) for t in tasks.values()]
    return {
        "id": run.pk,
        "name": run.name,
        "state": run.state,
        "message": run.message,
        "group": run.group,
        "owner": run.owner.name,
        "created_at": run.created_at.isoformat(),
        "started_at": _iso(run.started_at),
        "ended_at": _iso(run.ended_at),
        "controller_idle_s": controller_idle_s(),
        "controller_late_s": late_after_s(),
        "disk": full.as_json() if (full := installation_disk()) is not None else None,
        "environment": run.environment,
        "reuse": _reuse(run),
        "progress": 1.0 if run.state == RunState.SUCCEEDED else run_progress(progress),
        "tasks": [
            {
                "id": p.task_id,
                "state": p.state,
                "done": p.counts.done if p.counts else (1 if p.state == TaskState.DONE else 0),
                "total": p.counts.total if p.counts else 1,
                "message": tasks[p.task_id].message,
                "started_at": _iso(tasks[p.task_id].started_at),
                "ended_at": _iso(tasks[p.task_id].ended_at),
            }
            for p in progress
        ],
    }


class DirectLab:
    """Submit, list, follow and cancel runs of this machine's simrun."""

    def submit(
        self,
        *,
        workflow_text: str,
        sources: list[Path],
        group: str,
        reuse: bool = True,
        resume_from: str | None = None,
    ) -> dict[str, Any]:
        from runs.backends import backend
        from runs.models import Snapshot
        from runs.planner import PlanRefused
        from runs.services.submission import SubmissionRefused, create_run
        from runs.snapshots import SnapshotRefused, snapshot_directory
        from runs.store import store
        from runs.validation import load
        from runs.workflow import WorkflowInvalid

        try:
            workflow = load(workflow_text)
        except WorkflowInvalid as exc:
            lines = [f"line {e.line}: {e}" if e.line else str(e) for e in exc.errors]
            raise CommandError("the workflow is invalid:\n" + "\n".join(lines)) from None
        identity = _identity()
        digests = []
        for source in sources:
            try:
                info = snapshot_directory(store(), source)
            except SnapshotRefused as exc:
                raise CommandError(f"--source {source}: {exc}") from None
            Snapshot.objects.get_or_create(
                digest=info.digest,
                defaults={
                    "name": source.resolve().name,
                    "source_path": info.provenance.source_path,
                    "git_remote": info.provenance.git_remote,
                    "git_commit": info.provenance.git_commit,
                    "git_dirty": info.provenance.git_dirty,
                    "files": info.files,
                    "bytes": info.bytes,
                    "created_by": identity,
                },
            )
            digests.append(info.digest)
        try:
            run = create_run(
                identity=identity,
                workflow=workflow,
                sources=digests,
                nodes=backend().nodes(),
                group=group,
                reuse=reuse,
                resume_from=resume_from,
            )
        except (SubmissionRefused, PlanRefused) as exc:
            raise CommandError(str(exc)) from None
        except WorkflowInvalid as exc:
            raise CommandError("the workflow cannot run:\n" + str(exc)) from None
        return run_view(run)

    def runs(self, *, limit: int = 20) -> list[dict[str, Any]]:
        from runs.models import Run

        return [run_view(r) for r in Run.objects.select_related("owner")[:limit]]

    def show(self, run_id: str) -> dict[str, Any]:
        return run_view(self._run(run_id))

    def cancel(self, run_id: str) -> dict[str, Any]:
        """Cancel the run, then stop its pods from here: this way is taken when no service
        answers, and a cancel only recorded would leave the pods computing until one is back
        (the services' own settling finds it done and does nothing twice)."""
        from runs.backends import backend
        from runs.services.runs import NotAllowed, RunConflict, RunNotFound, cancel_run
        from runs.services.settle import settle

        try:
            run = cancel_run(run_id=run_id, identity=_identity())
        except (RunNotFound, RunConflict, NotAllowed) as exc:
            raise CommandError(str(exc)) from None
        failed = settle(run.pk, backend())
        stopping = [f for f in failed if f.startswith("stopping")]
        note = (
            f"its pods are stopped once simrun's services are back ({stopping[0]})"
            if stopping
            else "its running pods were told to stop"
        )
        return {**run_view(run), "note": note}

    def logs(self, run_id: str, task_id: str, *, tail: int | None = None) -> str:
        from runs.backends import backend
        from runs.store import task_paths

        run = self._run(run_id)
        if not run.tasks.filter(task_id=task_id).exists():
            raise CommandError(f"run {run_id} has no task {task_id!r}")
        kept = task_paths(run.pk, task_id).logs
        if kept.is_dir() and any(kept.iterdir()):
            parts = [
                f"==> {p.name} <==\n{p.read_text(errors='replace')}" for p in sorted(kept.iterdir())
            ]
        else:
            try:
                entries = backend().logs(run.workflow_name, task_id, tail_lines=tail)
            except KeyError:
                return ""
            parts = [
                f"==> {e.pod}-{e.attempt} <==\n{e.text if e.error is None else e.error}"
                for e in entries
            ]
        text = "\n".join(parts)
        if tail is not None:
            text = "\n".join(text.splitlines()[-tail:])
        return text

    def outputs(self, run_id: str) -> list[str]:
        from runs.store import run_paths, store

        run = self._run(run_id)
        root = store().root
        found = []
        for task in run.tasks.all():
            out = run_paths(run.pk).task(task.task_id).out
            if out.is_dir():
                found += [str(p.relative_to(root)) for p in sorted(out.rglob("*")) if p.is_file()]
        return found

    def _run(self, run_id: str) -> Any:
        from runs.models import Run

        run = Run.objects.filter(pk=run_id).select_related("owner").first()
        if run is None:
            raise CommandError(f"no run {run_id!r}")
        return run
