"""A run: its DAG, tasks, the chosen task's workers, plots and log, outputs; cancel.

The live part (summary, DAG, tasks, workers, plots, outputs) is one partial; while the run is
active the page's event stream (`runs.pages.live`) sends it again whenever it changed, and
htmx's SSE extension swaps it in; no polling. Choosing a task is a plain link (`?task=`), and
without JavaScript a live run's page reloads itself (a meta refresh inside <noscript>), so the
page reads and acts the same without it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe
from django_htmx.http import HttpResponseClientRedirect

from runs.pages import plots, run_plots
from runs.pages.access import HtmxHttpRequest, forbidden, with_identity
from runs.pages.dag import DagNode, draw
from runs.pages.run_files import log_tail, run_or_404
from runs.selectors.disk import installation_disk
from runs.selectors.outputs import run_outputs
from runs.selectors.reuse import run_reuse
from runs.selectors.runs_list import run_item
from runs.selectors.tasks import TaskView, run_tasks
from runs.selectors.workers import WorkerView, task_workers
from runs.services.runs import NotAllowed, RunConflict, RunNotFound, cancel_run, may_change
from runs.states import TaskState

if TYPE_CHECKING:
    from runs.models import Identity, Run, Task

TEMPLATE = "runs/run_detail.html"
NOSCRIPT_REFRESH_S = 10
"""Without JavaScript, a live run's page reloads itself this often (a meta refresh)."""
LIVE_TASK_STATES = TaskState.live()


def live_digest(html: str) -> str:
    """What the page's stream compares to know whether the page shows the latest partial."""
    return hashlib.sha1(html.encode()).hexdigest()[:16]


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
        **_outputs(run),
        "tasks_memory_svg": run_plots.memory_plot(run, list(run.tasks.all())),
        "may_cancel": not run.ended and may_change(identity, run),
        "live": not run.ended or bool(run.pending),  # followed until "cancelling" is over
        "refresh_s": NOSCRIPT_REFRESH_S,
        "reuse": run_reuse(run),
        "disk": installation_disk() if not run.ended else None,
    }
    if selected is not None:
        row = next(t for t in run.tasks.all() if t.task_id == selected.task_id)
        workers = task_workers(run, row)
        names = [w.worker for w in workers]
        log_pod = pod if pod in names else _default_pod(workers, row)
        context.update(
            workers=workers,
            memory_svg=memory_plot(workers, row.task_id) if workers else None,
            units_svg=run_plots.units_plot(run, row, workers) if row.splittable else None,
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


PAGE_OUTPUTS = 500
"""The most output files the page lists (the API lists more)."""
CUT_BECAUSE = {
    "files": f"the page lists the first {PAGE_OUTPUTS}",
    "entries": "the listing looked at as many entries as it may (SIMRUN_LISTING_MAX_ENTRIES)",
    "depth": "folders deeper than SIMRUN_LISTING_MAX_DEPTH are not shown",
    "time": "the listing took as long as it may (SIMRUN_LISTING_MAX_S)",
}


def _outputs(run: Run) -> dict[str, Any]:
    """The output files the page lists, and why the list is cut, if it is."""
    prefix = f"runs/{run.id}/"
    listing = run_outputs(run.id, limit=PAGE_OUTPUTS)
    files = [
        {"file": f, "href": reverse("pages:download", args=[run.id, f.path.removeprefix(prefix)])}
        for f in listing.files
    ]
    return {"outputs": files, "outputs_cut": CUT_BECAUSE.get(listing.cut or "")}


@with_identity
def run(request: HtmxHttpRequest, identity: Identity, run_id: str) -> HttpResponse:
    """The run page; its live part follows the page's event stream (`runs.pages.live`)."""
    the_run = run_or_404(run_id)
    context = run_context(
        the_run, identity, task=request.GET.get("task"), pod=request.GET.get("pod")
    )
    # rendered once here, so the page's stream knows (by its digest) what the page shows
    live = render_to_string(f"{TEMPLATE}#live", context, request=request)
    context.update(live_html=mark_safe(live), live_digest=live_digest(live))
    return render(request, TEMPLATE, context)


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
