"""Submitting a run: validate, resolve, plan and record at once; the rest in the background.

`create_run` answers at once with the run `submitting` (S3). `submit_run` (a Celery task's
body) builds or finds the environment, reserves the node and creates the workflow; it is
idempotent and resumable (C17): the workflow name is fixed at creation, an existing
environment is found, a reservation is kept, and a workflow that exists counts as submitted.
A lease in the row keeps two workers from submitting one run at the same time, and lets the
controller resume a submission whose worker died (C17). Which waiting run a worker takes, and
how many an identity may have waiting, is the fair share's (runs/services/fair_share.py).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from runs import environments, kept_environment
from runs.environments import SERVICE_ENVIRONMENT
from runs.local_packages import LocalPackageRefused, local_packages
from runs.models import Identity, Run, RunEnvironment, Snapshot, Task
from runs.planned_tasks import PlannedTask, plan_tasks, types_for_model
from runs.plans import Node, TaskPlan
from runs.ports import Backend, RunLaunch, TaskLaunch
from runs.priorities import tier_of
from runs.refusals import SubmissionRefused
from runs.selectors.servers import schedulable_nodes
from runs.services import background
from runs.services.builds import end_build, start_build
from runs.services.fair_share import admit_submission, claim_next_submission
from runs.services.reuse import check_resume, plan_reuse
from runs.states import RunState
from runs.store import local_package_rules, store
from runs.task_types import COMMAND, Types
from runs.validation import load, load_data, semantic_errors
from runs.workflow import (
    SplitMode,
    Workflow,
    WorkflowInvalid,
    input_location,
)

log = logging.getLogger(__name__)


def _lease() -> timedelta:
    from django.conf import settings

    return timedelta(seconds=settings.SIMRUN_SUBMIT_LEASE_S)


def refuse_commands(spec: Workflow, tier: str) -> None:
    """SubmissionRefused when `spec` has a `command` task and `tier` is not in
    SIMRUN_COMMAND_TIERS: such a task runs any program as the service's user on the local
    backend (in a pod on a cluster), so an operator may keep it to the owner or to people."""
    from django.conf import settings

    allowed: list[str] = settings.SIMRUN_COMMAND_TIERS
    commands = [task.id for task in spec.tasks if task.type == COMMAND]
    if commands and tier not in allowed:
        raise SubmissionRefused(
            f"task {commands[0]!r}: a {COMMAND!r} task may be submitted by "
            f"{', '.join(allowed) or 'nobody'} here (SIMRUN_COMMAND_TIERS), not by the "
            f"{tier} tier; use a task type of a plugin"
        )


def create_run(
    *,
    identity: Identity,
    workflow: str | dict[str, Any] | Workflow,
    sources: list[str],
    group: str = "",
    split: SplitMode | None = None,
    reserve: str | None = None,
    idempotency_key: str | None = None,
    reuse: bool = True,
    resume_from: str | None = None,
    nodes: list[Node] | None = None,
) -> tuple[Run, bool]:
    """Validate, resolve and plan a workflow (on the backend's nodes, or on `nodes`) and
    record the run `submitting` (S3); the run and whether it was made now (not: the run an
    earlier submission of this `idempotency_key` made). `reuse`: done units of earlier runs
    with the same key are linked; `resume_from`: whose are taken first (docs/reuse.md).
    Raises WorkflowInvalid (every error), SubmissionRefused (sources, plan; the identity's
    share: SubmissionThrottled, runs/services/fair_share.py) or PlanRefused."""
    if idempotency_key:
        existing = Run.objects.filter(owner=identity, idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing, False
    admit_submission(identity=identity, lock=False)  # a flood is refused before any work
    if nodes is None:
        nodes = schedulable_nodes()
    check_resume(reuse=reuse, resume_from=resume_from)
    model = _check_sources(sources)
    types = types_for_model(model)
    spec = checked_workflow(workflow, types)
    tier = tier_of(identity.kind)
    refuse_commands(spec, tier)
    reserve = reserve or spec.defaults.reserve
    _check_reserve(reserve, nodes)
    rows = plan_tasks(
        spec, nodes=nodes, model=model, split=split, tier=tier, reserve=reserve, types=types
    )
    run = Run(
        name=spec.name,
        owner=identity,
        principal=identity.principal,
        tier=tier,
        group=group,
        workflow=spec.model_dump(mode="json"),
        sources=sources,
        reserve=reserve or "",
        idempotency_key=idempotency_key or None,
        reuse=reuse,
        resume_from=resume_from or "",
    )
    run.workflow_name = f"simrun-{run.id}"
    try:
        _record(run, spec, rows, model)
    except IntegrityError:
        if idempotency_key:  # a concurrent retry with the same key won the race
            return Run.objects.get(owner=identity, idempotency_key=idempotency_key), False
        raise
    return run, True


def checked_workflow(workflow: str | dict[str, Any] | Workflow, types: Types) -> Workflow:
    """The workflow checked against `types` (the model environment's, once built: its
    plugins' own settings models); WorkflowInvalid with every error. A workflow already
    checked by a surface with the service's own types is checked again only when `types` are
    another environment's."""
    if isinstance(workflow, str):
        return load(workflow, types=types)
    if not isinstance(workflow, Workflow):
        return load_data(workflow, types=types)
    if types.env.name != SERVICE_ENVIRONMENT:
        errors = semantic_errors(workflow, types=types)
        if errors:
            raise WorkflowInvalid(errors)
    return workflow


def _record(run: Run, spec: Workflow, rows: list[PlannedTask], model: str | None) -> None:
    """The run's files, row and tasks, and its message once they are committed; the owner's
    share checked again first, its row locked, so two requests of one identity cannot both
    take its last place."""
    with transaction.atomic():
        admit_submission(identity=run.owner)
        _write_files(run, spec, rows, model)
        run.save(force_insert=True)
        Task.objects.bulk_create(Task(run=run, **row) for row in rows)
        background.enqueue_on_commit(background.SUBMIT_RUN, run_id=run.id)


def _check_sources(sources: list[str]) -> str | None:
    """The model's snapshot digest (the first source); SubmissionRefused for an unknown
    snapshot or a model whose local packages cannot be installed."""
    known = set(Snapshot.objects.filter(digest__in=sources).values_list("digest", flat=True))
    missing = [d for d in sources if d not in known]
    if missing:
        raise SubmissionRefused(f"sources: unknown snapshot(s) {', '.join(missing)}")
    model = sources[0] if sources else None
    if model:
        try:
            local_packages(store().snapshot(model), local_package_rules())
        except LocalPackageRefused as exc:
            raise SubmissionRefused(f"sources: the model's {exc}") from None
    return model


def _check_reserve(reserve: str | None, nodes: list[Node]) -> None:
    """SubmissionRefused when the node a run would reserve is not one of `nodes`."""
    if reserve and not any(n.name == reserve for n in nodes):
        names = ", ".join(n.name for n in nodes) or "none"
        raise SubmissionRefused(f"reserve: no node named {reserve!r} (nodes: {names})")


def _write_files(run: Run, spec: Workflow, rows: list[PlannedTask], model: str | None) -> None:
    """run.json and every task's task.json, before any pod can start."""
    store().snapshots.mkdir(parents=True, exist_ok=True)
    paths = store().run(run.id)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.run_file.write_text(
        json.dumps({"id": run.id, "workflow": spec.model_dump(mode="json"), "sources": run.sources})
    )
    for row in rows:
        task = paths.task(row["task_id"])
        task.root.mkdir(parents=True, exist_ok=True)
        inputs = {port: input_location(ref) for port, ref in row["inputs"].items()}
        task.task_file.write_text(
            json.dumps(
                {
                    "task": row["task_id"],
                    "type": row["type"],
                    "settings": row["settings"],
                    "inputs": inputs,
                    "model": model,
                },
                indent=2,
            )
        )


@contextmanager
def _lease_kept(run_id: str) -> Iterator[None]:
    """Renew the lease while a long step (an environment build) runs."""
    stop = threading.Event()

    def renew() -> None:
        try:
            while not stop.wait(_lease().total_seconds() / 3):
                # not once it was given back (builds.start_build): no worker holds it then
                Run.objects.filter(
                    pk=run_id, state=RunState.SUBMITTING, submit_lease_until__isnull=False
                ).update(submit_lease_until=timezone.now() + _lease())
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=renew, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class GivenBack(Exception):
    """The run's environment build has to wait (runs/services/builds.py): it was given back."""


# Runs a worker takes for one message at most, all but the last given back. A run given back
# is passed over until the build it waits for ends, so a worker meets this bound only while
# builds end and start again at each of its takes; the runs then left are sent again by the
# controller (fair_share.requeue_submissions).
TAKES = 20


def submit_run(*, run_id: str, backend: Backend) -> None:
    """Environment → reservation → workflow, then `queued`, of the waiting run whose turn it
    is (`claim_next_submission`: `run_id`, the message's run, may wait for its identity's
    turn; each message submits one run). A run whose environment build has to wait
    (runs/services/builds.py) is given back, and the worker takes the next turn's run instead.
    Safe to run twice or resume."""
    for _ in range(TAKES):
        taken = claim_next_submission()
        if taken is None or _submit(taken, backend):
            return


def _submit(run_id: str, backend: Backend) -> bool:
    """Submit the run whose lease this worker took: True once it is queued or failed, False
    when it was given back."""
    created = False
    try:
        with _lease_kept(run_id):
            run = Run.objects.get(pk=run_id)
            environment = _environment(run, backend)
            plan_reuse(
                run_id=run.id,
                environment=environment["ref"],
                local_packages=environment.get("local_packages", []),
                backend=backend,
            )
            if run.reserve and not run.reserved:
                backend.reserve(run.reserve, run.id)
                Run.objects.filter(pk=run_id).update(reserved=True)
            launch = run_launch(run, environment=environment["ref"])
            # From here a workflow may exist, even if `submit` raises (its reply lost): it is
            # cancelled then; cancelling one that was never made counts as done (C19).
            created = True
            backend.submit(launch)
        Run.objects.filter(pk=run_id, state=RunState.SUBMITTING).update(
            state=RunState.QUEUED,
            environment=environment,
            submitted_at=timezone.now(),
            submit_lease_until=None,
            version=F("version") + 1,
        )
    except GivenBack:
        return False
    except Exception as exc:
        log.exception("submission of run %s failed", run_id)
        fail_submission(run_id=run_id, message=f"submission failed: {exc}", created=created)
    return True


def fail_submission(*, run_id: str, message: str, created: bool) -> None:
    """C21: a failed submission fails a run still submitting; a workflow made is cancelled."""
    run = Run.objects.filter(pk=run_id).first()
    Run.objects.filter(pk=run_id, state=RunState.SUBMITTING).update(
        state=RunState.FAILED,
        message=message[-4000:],
        ended_at=timezone.now(),
        submit_lease_until=None,
        pending_cancel=created,
        pending_release=bool(run and run.reserved),
        version=F("version") + 1,
    )


def environment_of(run: Run) -> tuple[str, dict[str, bytes]]:
    """The environment a run's pods run in and its build context: the service's for a run
    without sources; else its model's, resolved under the constraints the run keeps (a
    crate's) when its model has no lock."""
    if not run.sources:
        return SERVICE_ENVIRONMENT, {}
    return environments.model_environment(
        store().snapshot(run.sources[0]),
        constraints=kept_environment.kept_constraints(run.id),
        local_rules=local_package_rules(),
    )


def _environment(run: Run, backend: Backend) -> RunEnvironment:
    """The run's environment, built once: its digest (`service` for a model without one) and
    the digest of every local package it installs (which plugin code the run used). A model
    without a lock is resolved under the constraints the run keeps (a crate's), else under the
    harness's; the files it is built from are kept beside the run (runs/kept_environment.py).
    GivenBack while its identity builds another or another run builds it (builds.py)."""
    ref, context = environment_of(run)
    if ref == SERVICE_ENVIRONMENT:
        return RunEnvironment(ref=ref)
    kept_environment.keep(run.id, context)
    if not backend.has_image(ref):
        if not start_build(run_id=run.id, ref=ref):
            raise GivenBack(ref)
        try:
            backend.build_image(context, ref)
        finally:
            end_build(run_id=run.id, ref=ref)
    packages = environments.local_packages_of(context)
    if packages:
        return RunEnvironment(ref=ref, local_packages=packages)
    return RunEnvironment(ref=ref)


def run_launch(run: Run, *, environment: str) -> RunLaunch:
    """The backend's view of a run, from its record."""
    from django.conf import settings

    tasks = []
    for task in run.tasks.order_by("position"):
        command = None
        image = None
        env: dict[str, str] = {}
        if task.type == "command":
            command = tuple(task.settings["args"])
            image = task.settings.get("image")
            env.update(task.settings.get("env", {}))
            env.update(command_inputs(task.inputs))
        tasks.append(
            TaskLaunch(
                task_id=task.task_id,
                type=task.type,
                splittable=task.splittable,
                dependencies=tuple(task.dependencies),
                plan=TaskPlan.from_json(task.plan),
                command=command,
                image=image,
                env=env,
            )
        )
    return RunLaunch(
        run_id=run.id,
        workflow_name=run.workflow_name,
        tasks=tuple(tasks),
        environment=environment,
        group=run.group,
        reserve=run.reserve or None,
        grace_s=settings.SIMRUN_GRACE_S,
    )


def command_inputs(inputs: dict[str, str]) -> dict[str, str]:
    """`SIMRUN_INPUT_<PORT>`: where a command task finds each input, relative to SIMRUN_RUN_DIR."""
    return {f"SIMRUN_INPUT_{port.upper()}": input_location(ref) for port, ref in inputs.items()}
