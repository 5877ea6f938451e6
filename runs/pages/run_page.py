"""A run: its DAG, tasks, the chosen task's workers, plots and log, outputs; cancel.

The live part (summary, DAG, tasks, workers, plots, outputs) is one partial that htmx
replaces every two seconds while the run is active; once the run has ended the partial
comes back without its trigger, so polling stops. Choosing a task is a plain link
(`?task=`), so the page reads the same without JavaScript.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from runs.models import Identity, Run, Task
from runs.pages import plots
from runs.pages.access import HtmxHttpRequest, forbidden, with_identity
from runs.pages.dag import DagNode, draw
from runs.pages.run_files import log_tail, run_or_404
from runs.selectors.outputs import run_outputs
from runs.selectors.reuse import run_reuse
from runs.selectors.runs_list import run_item
from runs.selectors.tasks import TaskView, run_tasks
from runs.selectors.workers import WorkerView, task_workers
from runs.services.runs import NotAllowed, RunConflict, RunNotFound, cancel_run, may_change
from runs.states import TaskState
from runs.store import task_paths
from simrun_harness.progress import UNIT_DONE, read_progress

TEMPLATE = "runs/run_detail.html"
LIVE_TASK_STATES = TaskState.live()


def chosen_task(tasks: list[TaskView], wanted: str | None) -> TaskView | None:
    """The task asked for, else the first active one, else the first split one, else the first."""
    by_id = {t.task_id: t for t in tasks}
    if wanted in by_id:
        return by_id[wanted]
    for test in (lambda t: t.state in LIVE_TASK_STATES, lambda t: t.splittable, lambda t: True):
        found = next((t for t in tasks if test(t)), None)
        if found is not None:
            return found
    return None


def units_done_times(run: Run, task: Task) -> list[tuple[float, float]]:
    """(seconds since the first unit done, units done) from the task's progress file.

    A unit done twice (a stale claim that was still alive) counts once, at its first time.
    """
    first_seen: dict[str, Any] = {}
    for event in read_progress(task_paths(run.id, task.task_id).progress):
        if event.event == UNIT_DONE and event.unit is not None:
            first_seen.setdefault(event.unit, event.time)
    return plots.cumulative(list(first_seen.values()))


def memory_plot(workers: list[WorkerView], task_id: str) -> Any:
    bars = [
        plots.MemoryBar(w.worker, w.peak_memory_gb, w.memory_limit_gb, w.oom_killed)
        for w in workers
    ]
    return plots.memory_per_worker(bars, label=task_id)


def run_context(
    run: Run, identity: Identity, *, task: str | None, pod: str | None, with_log: bool = True
) -> dict:
    """Everything the run page shows; the live partial needs no log (it polls on its own)."""
    tasks = run_tasks(run)
    selected = chosen_task(tasks, task)
    base = reverse("pages:run", args=[run.id])
    nodes = [
        DagNode(
            task_id=t.task_id,
            state=t.state,
            fraction=t.fraction,
            dependencies=tuple(t.dependencies),
            href=f"{base}?task={t.task_id}",
            selected=selected is not None and t.task_id == selected.task_id,
        )
        for t in tasks
    ]
    context: dict[str, Any] = {
        "run": run,
        "item": run_item(run),
        "tasks": tasks,
        "dag": draw(nodes, title=f"Tasks of run {run.id}"),
        "selected": selected,
        "outputs": _outputs(run),
        "may_cancel": not run.ended and may_change(identity, run),
        "live": not run.ended or bool(run.pending),  # polled until "cancelling" is over
        "reuse": run_reuse(run),
    }
    if selected is not None:
        row = next(t for t in run.tasks.all() if t.task_id == selected.task_id)
        workers = task_workers(run, row)
        names = [w.worker for w in workers]
        log_pod = pod if pod in names else _default_pod(workers, row)
        context.update(
            workers=workers,
            memory_svg=memory_plot(workers, row.task_id) if workers else None,
            units_svg=(
                plots.units_over_time(
                    units_done_times(run, row), total=row.units_total, label=row.task_id
                )
                if row.splittable
                else None
            ),
            tail=log_tail(run, row, log_pod) if log_pod and with_log else None,
        )
    return context


def _default_pod(workers: list[WorkerView], task: Task) -> str | None:
    live = next((w.worker for w in workers if w.state in LIVE_TASK_STATES), None)
    if live:
        return live
    if workers:
        return workers[0].worker
    return None if task.splittable else task.task_id


def _outputs(run: Run) -> list[dict[str, Any]]:
    prefix = f"runs/{run.id}/"
    listing = run_outputs(run.id, limit=500)
    return [
        {"file": f, "href": reverse("pages:download", args=[run.id, f.path.removeprefix(prefix)])}
        for f in listing.files
    ]


@with_identity
def run(request: HtmxHttpRequest, identity: Identity, run_id: str) -> HttpResponse:
    """The run page; its live partial when htmx polls it."""
    the_run = run_or_404(run_id)
    partial = bool(request.htmx and request.htmx.target == "run-live")
    context = run_context(
        the_run,
        identity,
        task=request.GET.get("task"),
        pod=request.GET.get("pod"),
        with_log=not partial,
    )
    return render(request, f"{TEMPLATE}#live" if partial else TEMPLATE, context)


@with_identity
def cancel(request: HtmxHttpRequest, identity: Identity, run_id: str) -> HttpResponse:
    """GET: the confirmation page (without JavaScript); POST: cancel, back to the run."""
    the_run = run_or_404(run_id)
    if not may_change(identity, the_run):
        return forbidden(
            request,
            f"Run {the_run.id} is {the_run.principal.name}'s; "
            "only they or the owner may cancel it.",
        )
    if request.method != "POST":
        return render(request, "runs/cancel_confirm.html", {"run": the_run})
    try:
        cancel_run(run_id=the_run.id, identity=identity)
        messages.success(request, f"Run {the_run.id} was cancelled; its pods are being stopped.")
    except (RunConflict, RunNotFound, NotAllowed) as exc:
        messages.error(request, str(exc))
    target = reverse("pages:run", args=[the_run.id])
    if request.htmx:
        return HttpResponseClientRedirect(target)
    return redirect(target)
