"""Submit: paste or upload a workflow, see its errors at their lines as you type, submit.

One view serves the page and its partials: htmx posts the text on every pause in typing
(`action=check`) and gets the check partial; uploading a file (`action=load`) puts its text
in the editor. Without JavaScript the same buttons post the whole form and get the page.
A task type's settings schema becomes a form whose task is appended to the workflow text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django_htmx.http import reswap, retarget

from runs.pages.access import HtmxHttpRequest, with_identity
from runs.pages.forms import SubmitForm
from runs.pages.schema_form import SchemaFormError, task_form_class, task_of, with_task
from runs.selectors.task_estimates import TaskEstimateView, estimate_workflow
from runs.services.submission import create_run
from runs.task_types import registry
from runs.workflow import WorkflowError, WorkflowInvalid

if TYPE_CHECKING:
    from runs.models import Identity

TEMPLATE = "runs/submit.html"


@dataclass
class Check:
    """What the check partial shows: every error with its line, or the estimate per task."""

    checked: bool = False
    errors: list[WorkflowError] = field(default_factory=list)
    estimates: list[dict[str, Any]] = field(default_factory=list)
    refused: str = ""

    @property
    def valid(self) -> bool:
        return self.checked and not self.errors and not self.refused


def check_workflow(text: str, *, identity: Identity, sources: list[str]) -> Check:
    """Validate a workflow text; when valid, plan it to show the estimate of every task."""
    if not text.strip():
        return Check()
    try:
        views = estimate_workflow(identity=identity, workflow=text, sources=sources)
    except WorkflowInvalid as exc:
        return Check(checked=True, errors=sorted(exc.errors, key=lambda e: (e.line or 0, str(e))))
    except ValueError as exc:  # a plan that cannot be made, an unknown snapshot or node
        return Check(checked=True, refused=str(exc))
    return Check(checked=True, estimates=[_estimate_row(v) for v in views])


def _estimate_row(view: TaskEstimateView) -> dict[str, Any]:
    shape = view.plan.get("shape", {})
    return {
        "task": view.task_id,
        "type": view.type,
        "units": view.units,
        "pods": view.plan.get("pods"),
        "processes": shape.get("processes"),
        "cores": shape.get("cores"),
        "memory_gb": shape.get("memory_gb"),
        "seconds": view.seconds,
    }


def _types() -> list[dict[str, Any]]:
    return [info.describe() for _, info in registry().items()]


@with_identity
def submit(request: HtmxHttpRequest, identity: Identity) -> HttpResponse:
    """The submit page; POST actions: check (partial under htmx), load (a file), submit."""
    if request.method != "POST":
        return render(
            request, TEMPLATE, {"form": SubmitForm(), "check": Check(), "types": _types()}
        )
    form = SubmitForm(request.POST, request.FILES)
    action = request.POST.get("action", "check")
    check = Check()
    if form.is_valid():
        text = form.text()
        if form.cleaned_data.get("file") is not None:  # the editor shows what was uploaded
            data = request.POST.copy()
            data["workflow"] = text
            form = SubmitForm(data)
            form.is_valid()
        check = check_workflow(text, identity=identity, sources=form.sources())
        if action == "submit" and check.valid:
            try:
                run, _ = create_run(
                    identity=identity,
                    workflow=text,
                    sources=form.sources(),
                    group=form.cleaned_data.get("group") or "",
                )
            except WorkflowInvalid as exc:
                check = Check(checked=True, errors=exc.errors)
            except ValueError as exc:
                check = Check(checked=True, refused=str(exc))
            else:
                return redirect("pages:run", run_id=run.pk)
    context = {"form": form, "check": check, "types": _types()}
    if request.htmx and action == "check":
        return render(request, f"{TEMPLATE}#check", context)
    if request.htmx and action == "load":
        return render(request, f"{TEMPLATE}#editor", context)
    status = 400 if action == "submit" else 200
    return render(request, TEMPLATE, context, status=status)


@with_identity
def task_type(request: HtmxHttpRequest, identity: Identity, name: str) -> HttpResponse:
    """A form from a type's settings schema; POST appends the task to the workflow text."""
    found = registry().get(name)
    if found is None:
        raise Http404(f"no task type {name!r}")
    info = found.describe()
    form_class = task_form_class(
        info["settings_schema"], ports=[] if info["any_port"] else info["ports"]
    )
    template = "runs/task_type.html"
    if request.method != "POST":
        context = {"info": info, "form": form_class(), "workflow": ""}
        return render(request, f"{template}#form" if request.htmx else template, context)
    form = form_class(request.POST)
    workflow = request.POST.get("workflow", "")
    if form.is_valid():
        try:
            text = with_task(workflow, task_of(form.cleaned_data, type_name=name))
        except SchemaFormError as exc:
            form.add_error(None, str(exc))
        else:
            submit_form = SubmitForm(initial={"workflow": text})
            submit_form.fields["workflow"].initial = text
            context = {
                "form": submit_form,
                "check": check_workflow(text, identity=identity, sources=[]),
                "types": _types(),
            }
            if request.htmx:
                return render(request, f"{TEMPLATE}#editor", context)
            return render(request, TEMPLATE, context)
    context = {"info": info, "form": form, "workflow": workflow}
    if request.htmx:  # htmx swaps only 2xx answers: show the errors in the type's panel
        response = render(request, f"{template}#form", context)
        return reswap(retarget(response, "#type-form"), "innerHTML")
    return render(request, template, context, status=400)
