"""Compare two or more runs side by side; rows whose values differ are highlighted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpResponse
from django.shortcuts import render

from runs.pages.access import HtmxHttpRequest, with_identity
from runs.pages.forms import CompareForm
from runs.selectors.compare import SECTIONS, Comparison, compare_runs
from runs.services.runs import RunNotFound

if TYPE_CHECKING:
    from runs.models import Identity


@with_identity
def compare(request: HtmxHttpRequest, identity: Identity) -> HttpResponse:
    """`?runs=a&runs=b` (the list's checkboxes) or `?runs=a b` (the form); `only=diff`."""
    ids = " ".join(request.GET.getlist("runs"))
    form = CompareForm({"runs": ids} if ids else None)
    comparison: Comparison | None = None
    only_differences = request.GET.get("only") == "diff"
    if form.is_bound and form.is_valid():
        try:
            comparison = compare_runs(form.cleaned_data["runs"])
        except (RunNotFound, ValueError) as exc:
            form.add_error("runs", str(exc))
    sections = []
    if comparison is not None:
        for section in SECTIONS:
            rows = [r for r in comparison.rows if r.section == section]
            if only_differences:
                rows = [r for r in rows if r.differs]
            if rows:
                sections.append({"name": section, "rows": rows})
    context = {
        "form": form,
        "comparison": comparison,
        "sections": sections,
        "only_differences": only_differences,
        "ids": form.cleaned_data.get("runs", []) if form.is_bound and not form.errors else [],
    }
    status = 400 if form.is_bound and form.errors else 200
    return render(request, "runs/compare.html", context, status=status)
