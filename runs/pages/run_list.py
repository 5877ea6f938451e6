"""The runs: filters and search, state badges, live progress bars of the active runs.

The table is a partial: htmx refreshes it every few seconds while a run on it is active,
and when a filter changes (the form's own hx-get), keeping the filters in the URL.
"""

from __future__ import annotations

from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import render

from runs.models import Identity, RunState
from runs.pages.access import HtmxHttpRequest, with_identity
from runs.pages.forms import RunFilterForm
from runs.selectors.runs_list import (
    BadFilter,
    RunPage,
    get_run,
    list_runs,
    run_item,
    runs_with_details,
    states_of,
)
from runs.services.runs import RunNotFound

TEMPLATE = "runs/run_list.html"
PAGE = 50


def search_runs(text: str, *, state: str | None, owner: str | None, group: str | None) -> RunPage:
    """Runs whose id, workflow name, group or message contain `text`, newest first.

    The list selector has no text search; this narrows its query and keeps its items.
    """
    runs = runs_with_details().filter(
        Q(id__icontains=text)
        | Q(name__icontains=text)
        | Q(group__icontains=text)
        | Q(message__icontains=text)
    )
    states = states_of(state)
    if states:
        runs = runs.filter(state__in=states)
    if group:
        runs = runs.filter(group=group)
    if owner:
        runs = runs.filter(Q(principal__name=owner) | Q(owner__name=owner))
    return RunPage(
        runs=[run_item(r) for r in runs.order_by("-created_at", "-id")[:PAGE]], next_cursor=None
    )


@with_identity
def runs(request: HtmxHttpRequest, identity: Identity) -> HttpResponse:
    """The list of runs; the table alone, or one run's status cell, when htmx asks."""
    if request.htmx and request.GET.get("run"):
        try:
            item = run_item(get_run(request.GET["run"]))
        except RunNotFound as exc:
            raise Http404(str(exc)) from exc
        return render(request, f"{TEMPLATE}#status", {"run": item})
    form = RunFilterForm(request.GET)
    page = RunPage(runs=[], next_cursor=None)
    error = ""
    if form.is_valid():
        values = form.cleaned_data
        filters = {
            "state": values["state"] or None,
            "owner": values["owner"] or None,
            "group": values["group"] or None,
        }
        try:
            if values["q"]:
                page = search_runs(values["q"], **filters)
            else:
                page = list_runs(**filters, cursor=request.GET.get("cursor") or None, limit=PAGE)
        except BadFilter as exc:
            error = str(exc)
    query = request.GET.copy()
    query.pop("cursor", None)
    context = {
        "form": form,
        "page": page,
        "error": error,
        "live": any(r.state in RunState.live() for r in page.runs),
        "query": query.urlencode(),
    }
    if request.htmx and request.htmx.target == "runs-table":
        return render(request, f"{TEMPLATE}#table", context)
    return render(request, TEMPLATE, context)
