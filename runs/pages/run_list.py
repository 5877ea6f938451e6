"""The runs: filters and search, state badges, live progress bars of the active runs.

The table is a partial, replaced when a filter changes (the form's own hx-get), keeping the
filters in the URL. While a run on it is active, the list's event stream (`runs.pages.live`)
sends the status cell of each active run whose state or progress changed; without JavaScript
the page reloads itself (a meta refresh inside <noscript>).
"""

from __future__ import annotations

from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import render

from runs.models import Identity
from runs.pages.access import HtmxHttpRequest, with_identity
from runs.pages.forms import RunFilterForm
from runs.pages.live import followed, status_key
from runs.pages.run_page import NOSCRIPT_REFRESH_S
from runs.selectors.runs_list import (
    BadFilter,
    RunPage,
    list_runs,
    run_item,
    runs_with_details,
    states_of,
)

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
    """The list of runs; the table alone when htmx asks (a filter changed)."""
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
        "live": any(followed(r) for r in page.runs),
        # the live runs shown and what their status cells show, for the list's event stream
        "watch": ",".join(f"{r.id}:{status_key(r)}" for r in page.runs if followed(r)),
        "query": query.urlencode(),
        "refresh_s": NOSCRIPT_REFRESH_S,
    }
    if request.htmx and request.htmx.target == "runs-table":
        return render(request, f"{TEMPLATE}#table", context)
    return render(request, TEMPLATE, context)
