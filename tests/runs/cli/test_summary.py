"""The main job's closing summary."""

from __future__ import annotations

from runs.cli.summary import OUTPUTS_SHOWN, summary_lines

RUN = {
    "id": "r1",
    "state": "succeeded",
    "message": "",
    "created_at": "2026-01-02T10:00:00+00:00",
    "ended_at": "2026-01-02T10:00:42.25+00:00",
}


def test_outputs_are_listed_as_given_and_the_time_is_the_records() -> None:
    lines = summary_lines(
        RUN,
        ["/data/store/runs/r1/tasks/scan/out/scan.nc"],
        pages="http://127.0.0.1:8000/runs/r1/",
        kept=None,
    )
    assert lines == [
        "state:    succeeded",
        "time:     42.2s from submission to the end",
        "outputs:  /data/store/runs/r1/tasks/scan/out/scan.nc",
        "pages:    http://127.0.0.1:8000/runs/r1/",
    ]


def test_kept_services_come_with_the_command_that_stops_them() -> None:
    many = [f"/s/runs/r1/tasks/scan/out/{n}.csv" for n in range(OUTPUTS_SHOWN + 3)]
    lines = summary_lines(RUN, many, pages="p", kept="left running")
    assert lines[-1] == "services: left running; stop them with `simrun stop`"
    assert "... and 3 more (`simrun outputs r1`)" in lines[-3]
    assert sum(line.endswith(".csv") for line in lines) == OUTPUTS_SHOWN


def test_a_login_link_is_given_beside_the_pages_of_services_left_running() -> None:
    lines = summary_lines(RUN, [], pages="http://x/runs/r1/", kept="left running", login="L")
    assert lines[-3:] == [
        "pages:    http://x/runs/r1/",
        "login:    L",
        "services: left running; stop them with `simrun stop`",
    ]
