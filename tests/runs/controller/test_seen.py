"""What a process notes of the runs it derived (runs/controller/seen.py), with plain values:
which rows a tick derives, which it asks the rest of, and the digest a row keeps."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from runs.controller import seen as seen_module
from runs.controller.reconcile import noted_in_row
from runs.controller.seen import (
    REVISION_MAX,
    Derived,
    Seen,
    derived_from,
    same_revision,
    same_status,
)
from runs.models import Run
from runs.ports import AttemptFailure, BackendStatus, PodPhase, PodStatus, WorkflowPhase


class Row(NamedTuple):
    pk: str
    version: int
    state: str
    workflow_name: str


def status(phase: PodPhase = PodPhase.QUEUED, **failures: list[AttemptFailure]) -> BackendStatus:
    return BackendStatus(
        phase=WorkflowPhase.RUNNING,
        pods={"t": PodStatus("t", phase)},
        failures=failures,
    )


def noted(*rows: tuple[Row, BackendStatus | None]) -> Seen:
    seen = Seen()
    for row, read in rows:
        seen.note(row.pk, Derived(row.version, row.state, read))
    return seen


A = Row("a", 3, "running", "wf-a")
B = Row("b", 1, "queued", "wf-b")


def test_a_row_is_unnoted_until_noted_at_its_version_and_state() -> None:
    seen = noted((A, status()))

    assert seen.unnoted([A, B]) == [B]
    assert seen.unnoted([A._replace(version=4), A._replace(state="queued")]) == [
        A._replace(version=4),
        A._replace(state="queued"),
    ]
    seen.keep_only({"b"})
    assert seen.unnoted([A]) == [A]


def test_a_noted_row_is_derived_only_when_its_status_changed() -> None:
    """The same status object, or an equal one, derives to the record as it is: skipped; a
    status not equal, or a record at another version or state, is derived."""
    read = status()
    seen = noted((A, read), (B, None))

    assert seen.to_derive([A, B], {"wf-a": read, "wf-b": None}) == []
    assert seen.to_derive([A], {"wf-a": status()}) == []
    assert seen.to_derive([A], {"wf-a": status(PodPhase.RUNNING)}) == [A]
    assert seen.to_derive([B], {"wf-b": read}) == [B]
    assert seen.to_derive([A._replace(version=4)], {"wf-a": read}) == [A._replace(version=4)]
    seen.drop("a")
    assert seen.to_derive([A], {"wf-a": read}) == [A]


def test_a_row_whose_status_was_not_read_is_not_derived() -> None:
    assert Seen().to_derive([A], {}) == []


def test_a_run_whose_record_may_change_with_its_status_is_derived_at_every_tick() -> None:
    """C6, C8: a merge marker awaited, or an exit 137 not counted yet (its report may count
    the kill), is derived though its status stayed; a kill counted is not."""
    unexplained = status(t=[AttemptFailure(0, 137)])
    seen = Seen()
    seen.note("a", Derived(3, "running", status(), merge_pending={"t": "2026-12-03T10:00:00"}))
    seen.note("b", Derived(1, "queued", unexplained))
    assert seen.to_derive([A, B], {"wf-a": status(), "wf-b": unexplained}) == [A, B]

    seen.note("b", Derived(1, "queued", unexplained, oom_kills={"t": [0]}))
    assert seen.to_derive([B], {"wf-b": unexplained}) == []


@pytest.mark.parametrize("cold", [False, True])
def test_the_digest_of_a_status_is_the_one_rows_written_before_hold(
    cold: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row written by an earlier controller notes this digest (of the JSON of
    `dataclasses.asdict`): a restarted controller must compute the same, or it would derive
    every run again; also before it has cached anything of the status's types (`cold`)."""
    if cold:
        monkeypatch.setattr(seen_module, "_FIELDS", {})
    read = BackendStatus(
        phase=WorkflowPhase.RUNNING,
        pods={
            "scan-w0": PodStatus("scan-w0", PodPhase.RUNNING, attempts=2, node="n1"),
            "scan-w1": PodStatus(
                "scan-w1", PodPhase.FAILED, attempts=1, exit_code=137, message="é"
            ),
        },
        failures={
            "scan-w1": [AttemptFailure(0, 137, oom_killed=True, message="OOMKilled")],
            "scan-w0": [AttemptFailure(1, None)],
        },
        message="two pods",
    )

    assert derived_from(7, read) == "7:579ddb9ab9734027c893f744c4e4b247"
    assert derived_from(0, BackendStatus(phase=WorkflowPhase.PENDING)) == (
        "0:ac77082a0fdcc925c72fd6741161bdb0"
    )
    assert derived_from(7, None) == ""


def test_with_revisions_only_a_run_noted_from_another_revision_is_read() -> None:
    """A backend with revisions (Argo: the workflow's resourceVersion): a run noted at the
    revision the backend has now is not read; one noted at another, or without one, or that
    may change all the same, is; so is one not noted at its version and state."""
    seen = Seen()
    seen.note("a", Derived(3, "running", status(), revision="7"))
    seen.note("b", Derived(1, "queued", status()))
    merging = Derived(
        2, "running", status(), merge_pending={"t": "2026-12-03T10:00:00"}, revision="9"
    )
    seen.note("c", merging)
    c = Row("c", 2, "running", "wf-c")

    assert seen.to_read([A, B, c], {"wf-a": "7", "wf-b": "8", "wf-c": "9"}) == [B, c]
    assert seen.to_read([A], {"wf-a": "8"}) == [A]
    assert seen.to_read([A], {}) == [A]
    assert seen.to_read([A._replace(version=4)], {"wf-a": "7"}) == [A._replace(version=4)]


def test_a_status_read_again_unchanged_is_noted_at_its_new_revision() -> None:
    """The workflow changed but not its status: not derived, and noted at the new revision,
    so the next tick does not read it again."""
    read = status()
    seen = Seen()
    seen.note("a", Derived(3, "running", read, revision="7"))

    assert seen.to_derive([A], {"wf-a": status()}, {"wf-a": "8"}) == []
    assert seen.to_read([A], {"wf-a": "8"}) == []


def test_a_run_noted_by_its_revision_is_derived_once_its_status_is_read() -> None:
    """Noted from its row by the revision (its status not read here): derived as soon as a
    status is read for it, even one equal to nothing noted (a gone workflow: None)."""
    seen = Seen()
    seen.note("a", Derived(3, "running", None, revision="7", read=False))

    assert seen.to_read([A], {"wf-a": "7"}) == []
    assert seen.to_derive([A], {"wf-a": None}, {}) == [A]


def test_a_row_notes_the_revision_beside_the_digest() -> None:
    """`<version>:<digest>@<revision>`: a restarted process compares the revision when its
    backend has one, else the digest; a revision too long for the row is left out."""
    read = status()
    noted = derived_from(3, read, "1234")

    assert noted == derived_from(3, read) + "@1234"
    assert same_status(noted, 3, read) and same_status(derived_from(3, read), 3, read)
    assert not same_status(noted, 3, status(PodPhase.RUNNING)) and not same_status(noted, 4, read)
    assert same_revision(noted, 3, "1234")
    assert not same_revision(noted, 3, "1235") and not same_revision(noted, 4, "1234")
    assert not same_revision(derived_from(3, read), 3, "1234")
    assert not same_revision(noted, 3, None)
    assert derived_from(3, read, "9" * 41) == derived_from(3, read)


def test_a_record_that_may_change_with_its_status_unchanged_notes_no_revision() -> None:
    """C6, C8: a record awaiting a merge marker, or an exit 137 not counted yet, must be
    derived at every tick, also by a restarted process: its row names no revision to skip it
    by."""
    unexplained = status(t=[AttemptFailure(0, 137)])
    plain: dict[str, Any] = {"merge_pending": {}, "oom_kills": {}}

    assert noted_in_row(3, status(), "7", plain) == derived_from(3, status(), "7")
    merging = {**plain, "merge_pending": {"t": "2026-12-03T10:00:00"}}
    assert noted_in_row(3, status(), "7", merging) == derived_from(3, status())
    assert noted_in_row(3, unexplained, "7", plain) == derived_from(3, unexplained)
    counted = {**plain, "oom_kills": {"t": [0]}}
    assert noted_in_row(3, unexplained, "7", counted) == derived_from(3, unexplained, "7")
    assert noted_in_row(3, None, "7", plain) == ""


# --- gaps found by mutation testing (docs/testing.md) ---------------------------------------


def test_a_row_whose_status_was_not_read_leaves_the_rows_after_it_to_derive() -> None:
    """With revisions only the runs that changed are read: a row not read this tick is
    passed over, and a changed row after it is still derived."""
    seen = noted((A, status()))

    assert seen.to_derive([A, B], {"wf-b": status()}) == [B]


def test_a_status_read_again_unchanged_at_each_new_revision_is_never_derived() -> None:
    """The workflow changes but not its status, at one revision and then another: noted at
    each, and derived at neither."""
    seen = Seen()
    seen.note("a", Derived(3, "running", status(), revision="7"))

    assert seen.to_derive([A], {"wf-a": status()}, {"wf-a": "8"}) == []
    assert seen.to_derive([A], {"wf-a": status()}, {"wf-a": "9"}) == []


def test_a_revision_as_long_as_a_row_can_note_is_noted() -> None:
    """`REVISION_MAX` characters fit beside the digest (the field holds 96)."""
    revision = "9" * REVISION_MAX

    assert derived_from(3, status(), revision) == derived_from(3, status()) + "@" + revision
    assert (
        len(derived_from(2**31, status(), revision))
        <= Run._meta.get_field("derived_from").max_length
    )
