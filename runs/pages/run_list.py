"""The runs: filters and search, state badges, live progress bars of the active runs.

The table is a partial, replaced when a filter changes (the form's own hx-get), keeping the
filters in the URL. While a run on it is active, the list's event stream (`runs.pages.live`)
sends the status cell of each active run whose state or progress changed, and, on the first
page, a notice of the runs submitted since that match the filters, whose link brings the table
with them (not inserted by themselves: a row moving under the pointer, or a ticked box lost,
would surprise more than a notice). Without JavaScript the page reloads itself (a meta refresh
inside <noscript>).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpResponse, QueryDict
from django.shortcuts import render

from runs.pages.access import HtmxHttpRequest, with_identity
from runs.pages.forms import RunFilterForm
from runs.pages.live import followed, status_key
from runs.pages.run_page import NOSCRIPT_REFRESH_S
from runs.selectors.runs_list import (
    NOTHING_SHOWN,
    BadFilter,
    RunPage,
    cursor_at,
    list_runs,
    narrowed,
    run_item,
    runs_with_details,
    text_query,
)

if TYPE_CHECKING:
    from runs.models import Identity

TEMPLATE = "runs/run_list.html"
PAGE = 50


def search_runs(text: str, *, state: str | None, owner: str | None, group: str | None) -> RunPage:
    """Runs whose id, workflow name, group or message contain `text`, newest first.

    The list selector has no text search; this narrows its query and keeps its items.
    """
    runs = narrowed(runs_with_details(), state=state, group=group, owner=owner)
    runs = runs.filter(text_query(text))
    return RunPage(
        runs=[run_item(r) for r in runs.order_by("-created_at", "-id")[:PAGE]], next_cursor=None
    )


def stream_query(page: RunPage, filters: dict[str, Any] | None) -> str:
    """The query of the list's event stream: the live runs shown and what their status cells
    show; on the first page also the position of the newest run shown and the filters, so
    the stream says when newer runs match ("" when there is nothing to follow)."""
    query = QueryDict(mutable=True)
    watched = ",".join(f"{r.id}:{status_key(r)}" for r in page.runs if followed(r))
    if watched:
        query["runs"] = watched
    if filters is not None:
        newest = page.runs[0] if page.runs else None
        query["after"] = (
            cursor_at(created_at=newest.created_at, run_id=newest.id) if newest else NOTHING_SHOWN
        )
        for name in ("q", "state", "owner", "group"):
            if filters.get(name):
                query[name] = filters[name]
    return query.urlencode()


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
    first_page = not error and form.is_valid() and not request.GET.get("cursor")
    context = {
        "form": form,
        "page": page,
        "error": error,
        "live": any(followed(r) for r in page.runs),
        "stream": stream_query(page, form.cleaned_data if first_page else None),
        "query": query.urlencode(),
        "refresh_s": NOSCRIPT_REFRESH_S,
    }
    if request.htmx and request.htmx.target == "runs-table":
        return render(request, f"{TEMPLATE}#table", context)
    return render(request, TEMPLATE, context)
