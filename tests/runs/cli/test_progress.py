"""Following a run where no terminal draws bars: plain lines a pipe or a log can keep."""

from __future__ import annotations

from typing import Any

from runs.cli.progress import PLAIN_EVERY_S, Said, follow_plain, line_due, polls


def test_a_tasks_first_line_and_each_new_state_are_printed_at_once() -> None:
    assert line_due(None, state="waiting", done=0, now=0.0)
    assert line_due(Said("waiting", 0, at=10.0), state="running", done=0, now=10.1)


def test_a_moving_count_is_printed_at_most_every_few_seconds() -> None:
    said = Said("running", 3, at=10.0)
    assert not line_due(said, state="running", done=4, now=10.0 + PLAIN_EVERY_S / 2)
    assert line_due(said, state="running", done=4, now=10.0 + PLAIN_EVERY_S)


def test_a_count_that_did_not_move_prints_nothing_however_long() -> None:
    assert not line_due(Said("running", 3, at=0.0), state="running", done=3, now=3600.0)


class Scripted:
    """A lab whose `show` gives the run as it will be at each poll, then stays at the last."""

    def __init__(self, *states: dict[str, Any]) -> None:
        self.states = list(states)

    def show(self, run_id: str) -> dict[str, Any]:
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]


def run(state: str, *tasks: tuple[str, str, int, int]) -> dict[str, Any]:
    return {
        "id": "r1",
        "state": state,
        "message": "",
        "tasks": [{"id": i, "state": s, "done": d, "total": t} for i, s, d, t in tasks],
    }


def test_plain_following_prints_each_change_of_state_and_ends_with_the_run() -> None:
    lab = Scripted(
        run("running", ("scan", "running", 0, 25), ("summary", "waiting", 0, 1)),
        run("running", ("scan", "running", 0, 25), ("summary", "waiting", 0, 1)),
        run("running", ("scan", "done", 25, 25), ("summary", "running", 0, 1)),
        run("succeeded", ("scan", "done", 25, 25), ("summary", "done", 1, 1)),
    )
    lines: list[str] = []

    last = follow_plain(polls(lab, "r1", interval=0, check=None), lines.append)

    assert last["state"] == "succeeded"
    said = [line.split()[:3] for line in lines]
    assert said == [
        ["scan", "0/25", "running"],
        ["summary", "0/1", "waiting"],
        ["scan", "25/25", "done"],
        ["summary", "0/1", "running"],
        ["summary", "1/1", "done"],
    ]


def test_the_controller_is_late_after_its_limit_and_said_once_each_way() -> None:
    """One warning when reconciles stop, one line when they are back."""
    from runs.cli.follow_notes import ControllerWatch

    def polled(idle: float | None, state: str = "running") -> dict[str, Any]:
        return {**run(state), "controller_idle_s": idle, "controller_late_s": 10.0}

    watch = ControllerWatch()
    assert watch.note(polled(2.0)) is None
    late = watch.note(polled(10.5))
    assert late and "has not reconciled for 10s" in late and "`simrun serve`" in late
    assert watch.note(polled(30.0)) is None  # said once
    assert watch.note(polled(0.5)) == "the controller is reconciling again; following run r1"
    assert watch.note(polled(None)) is not None  # never reconciled: late at once
    assert watch.note(polled(None, state="succeeded")) is None  # nothing left to advance


def test_a_run_still_in_submission_is_given_the_limit_its_server_says() -> None:
    """The main job on a fresh machine: while the worker builds the run's environment the
    watcher, idle until the submission rings it, has not passed for longer than a followed
    run's limit; the server gives a run in submission a longer one, and following keeps to
    the limit of each poll."""
    from runs.cli.follow_notes import ControllerWatch

    def polled(idle: float, state: str, limit: float) -> dict[str, Any]:
        return {**run(state), "controller_idle_s": idle, "controller_late_s": limit}

    watch = ControllerWatch()
    assert watch.note(polled(58.0, "submitting", 70.0)) is None
    assert watch.note(polled(0.4, "queued", 10.0)) is None  # rung by the submission: passing
    late = watch.note(polled(12.0, "running", 10.0))
    assert late is not None and "has not reconciled for 12s" in late


def test_following_waits_out_a_service_that_does_not_answer_and_says_so_once() -> None:
    """The API down is said once with the command that starts it; the run is
    followed on when it answers again."""
    from runs.cli.client import Unreachable

    class Down(Scripted):
        def __init__(self, failures: int, *states: dict[str, Any]) -> None:
            super().__init__(*states)
            self.failures = failures

        def show(self, run_id: str) -> dict[str, Any]:
            if self.failures:
                self.failures -= 1
                raise Unreachable("http://h/", "[Errno 111] Connection refused", sent=False)
            return super().show(run_id)

    said: list[str] = []
    lab = Down(
        3, run("running", ("scan", "running", 0, 2)), run("succeeded", ("scan", "done", 2, 2))
    )
    last = list(polls(lab, "r1", interval=0, check=None, say=said.append))[-1]
    assert last["state"] == "succeeded"
    assert said == [
        "warning: simrun at http://h/ does not answer ([Errno 111] Connection refused); "
        "is it running? start it with `simrun serve` (still following run r1)",
        "simrun answers again; following run r1",
    ]


def test_a_full_disk_is_said_once_each_way_instead_of_the_controller_being_late() -> None:
    """A full disk stops the controller from recording its passes: following names the disk
    (its path, what is free, what simrun needs) rather than saying the services are not
    running, once when it fills and once when there is room again."""
    from runs.cli.follow_notes import watched

    disk = {"full": True, "path": "/d/.simrun", "free_bytes": 0, "needed_bytes": 4 * 2**20}

    def polled(idle: float, full: bool) -> dict[str, Any]:
        late = {"controller_idle_s": idle, "controller_late_s": 10.0}
        return {**run("running"), **late, "disk": disk if full else None}

    said: list[str] = []
    # right after the disk is freed the controller's last pass is still the old one
    polls_ = [polled(2.0, False), polled(60.0, True), polled(90.0, True), polled(95.0, False)]
    polls_.append(polled(1.0, False))
    list(watched(iter(polls_), said.append))

    assert said == [
        "warning: the disk of /d/.simrun is full: 0B free, simrun needs 4.0MiB free; the run "
        "waits until space is freed there (still following run r1)",
        "there is room on the disk again; following run r1",
    ]
