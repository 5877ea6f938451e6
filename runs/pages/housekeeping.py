"""The owner's pages: cleanup of ended runs and the usage of the run store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpResponse
from django.shortcuts import render

from runs.pages.access import HtmxHttpRequest, owner_only
from runs.pages.forms import CleanupForm
from runs.selectors.runs_list import run_names
from runs.selectors.usage import store_usage
from runs.services.cleanup import CleanupResult, cleanup_runs

if TYPE_CHECKING:
    from runs.models import Identity


@owner_only
def cleanup(request: HtmxHttpRequest, identity: Identity) -> HttpResponse:
    """GET: the form; POST: the cleanup (a dry run lists what would be removed)."""
    result: CleanupResult | None = None
    if request.method == "POST":
        form = CleanupForm(request.POST)
        if form.is_valid():
            values = form.cleaned_data
            try:
                result = cleanup_runs(
                    identity=identity,
                    older_than_days=values["older_than_days"],
                    group=values["group"] or None,
                    failed_only=values["failed_only"],
                    dry_run=values["dry_run"],
                )
            except ValueError as exc:
                form.add_error("older_than_days", str(exc))
    else:
        form = CleanupForm()
    status = 400 if form.errors else 200
    return render(request, "runs/cleanup.html", {"form": form, "result": result}, status=status)


@owner_only
def usage(request: HtmxHttpRequest, identity: Identity) -> HttpResponse:
    """Bytes of the run store per run and per group; a hard-linked file counts once."""
    found = store_usage()
    names = run_names(list(found.runs))
    runs = [
        {"id": run_id, "name": names.get(run_id), "bytes": size}
        for run_id, size in sorted(found.runs.items(), key=lambda item: -item[1])
    ]
    groups = sorted(found.groups.items(), key=lambda item: -item[1])
    return render(request, "runs/usage.html", {"usage": found, "runs": runs, "groups": groups})
