"""The forms of the pages: filters of the runs, submission, compare and cleanup."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from runs.selectors.identities import identity_names
from runs.selectors.snapshots import newest_snapshots
from runs.states import RunState
from runs.workflow import WorkflowInvalid
from runs.workflow_limits import limits
from runs.workflow_text import decode


class RunFilterForm(forms.Form):
    """Filters of the list of runs; every field optional, read from the query string."""

    q = forms.CharField(
        label="Search", required=False, help_text="Id, workflow name, group or message."
    )
    state = forms.ChoiceField(
        label="State", required=False, choices=[("", "any"), ("live", "live"), *RunState.choices()]
    )
    owner = forms.ChoiceField(label="Owner", required=False)
    group = forms.CharField(label="Group", required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = identity_names()
        self.fields["owner"].choices = [("", "anyone"), *((n, n) for n in names)]  # type: ignore[attr-defined]


def snapshot_choices() -> list[tuple[str, str]]:
    """Existing snapshots, newest first, for the model of a submission."""
    return [("", "none")] + [
        (s.digest, f"{s.name or 'snapshot'} · {s.digest[:12]} · {s.created_at:%Y-%m-%d %H:%M}")
        for s in newest_snapshots(200)
    ]


class SubmitForm(forms.Form):
    """A workflow pasted or uploaded, with the run's group and model snapshot."""

    workflow = forms.CharField(
        label="Workflow (YAML or JSON)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"class": "workflow", "spellcheck": "false", "rows": 22}),
    )
    file = forms.FileField(label="…or upload a workflow file", required=False)
    group = forms.CharField(
        label="Group", required=False, max_length=128, help_text="e.g. the study it belongs to"
    )
    model = forms.ChoiceField(
        label="Model snapshot",
        required=False,
        help_text="The sources the tasks read as their model, newest first.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = snapshot_choices()  # type: ignore[attr-defined]
        # a NUL in the text is reported by the workflow's reader, with its line, in the check
        self.fields["workflow"].validators = []

    def clean_file(self) -> str | None:
        upload: UploadedFile | None = self.cleaned_data.get("file")
        if upload is None:
            return None
        try:  # the size, then the encoding, as every surface reads a workflow
            return decode(upload.read(limits().max_bytes + 1))
        except WorkflowInvalid as exc:
            raise forms.ValidationError(
                [f"line {e.line}: {e}" if e.line else str(e) for e in exc.errors]
            ) from None

    def text(self) -> str:
        """The workflow's text: the uploaded file's if one came, else the pasted one."""
        return self.cleaned_data.get("file") or self.cleaned_data.get("workflow") or ""

    def sources(self) -> list[str]:
        model = self.cleaned_data.get("model")
        return [model] if model else []


class CompareForm(forms.Form):
    runs = forms.CharField(
        label="Run ids",
        help_text="Two or more, separated by spaces or commas.",
        widget=forms.TextInput(attrs={"size": 50}),
    )

    def clean_runs(self) -> list[str]:
        ids = [p for p in self.cleaned_data["runs"].replace(",", " ").split() if p]
        unique = list(dict.fromkeys(ids))
        if len(unique) < 2:
            raise forms.ValidationError("give at least two different runs")
        return unique


class CleanupForm(forms.Form):
    older_than_days = forms.FloatField(
        label="Ended at least this many days ago", min_value=0, initial=30
    )
    group = forms.CharField(label="Only the group", required=False)
    failed_only = forms.BooleanField(label="Only failed runs", required=False)
    dry_run = forms.BooleanField(
        label="Dry run: list what would be removed", required=False, initial=True
    )
