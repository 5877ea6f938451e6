"""A run's tasks, workers, outputs (with byte ranges) and logs."""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.store import task_paths
from tests import factories
from tests.api import scenes
from tests.api.conftest import Lab, streamed

pytestmark = pytest.mark.django_db


def test_tasks_show_ledger_counts_and_first_and_last_progress_lines(lab: Lab) -> None:
    """S6: a task's ledger counts and the first and last lines of its progress file."""
    run = scenes.split_run(by=lab.person.identity, units=5)
    first = scenes.work(run, "scan-w0", done=1)
    last = scenes.work(run, "scan-w1", done=2, hold=1)
    [task] = lab.other.client.get(f"/api/runs/{run.id}/tasks/").json()
    assert task["counts"] == {"pending": 1, "claimed": 1, "done": 3, "total": 5}
    assert (task["first"]["unit"], task["first"]["worker"]) == (first[0], "scan-w0")
    assert (task["last"]["unit"], task["last"]["worker"]) == (last[-1], "scan-w1")
    assert task["fraction"] == 0.6


def test_workers_combine_pods_reports_claims_and_progress(lab: Lab) -> None:
    """S9: state, node, attempts, processes, units done over attempts, units claimed now,
    peak memory and limit, killed for memory."""
    run = scenes.split_run(by=lab.person.identity, units=8)
    scenes.work(run, "scan-w0", attempt=0, done=2)
    scenes.report(run, "scan-w0", attempt=0, oom_kills=1, exit_code=137, peak_memory_gb=1.5)
    scenes.work(run, "scan-w0", attempt=1, done=1, hold=2)
    scenes.work(run, "scan-w1", done=3)
    scenes.report(run, "scan-w1", processes=4, units_done=3)
    Run.objects.filter(pk=run.pk).update(
        pods={
            "scan-w0": {"phase": "running", "attempts": 2, "node": "node-b", "exit_code": None},
            "scan-w1": {"phase": "succeeded", "attempts": 1, "node": "node-a", "exit_code": 0},
            "other-w0": {"phase": "running", "attempts": 1, "node": "node-a", "exit_code": None},
        }
    )
    workers = lab.agent.client.get(f"/api/runs/{run.id}/workers/?task=scan").json()
    w0, w1 = workers
    assert (w0["worker"], w0["role"], w0["state"], w0["node"]) == (
        "scan-w0",
        "base",
        "running",
        "node-b",
    )
    assert (w0["attempts"], w0["units_done"], w0["units_claimed"]) == (2, 3, 2)
    assert (w0["oom_killed"], w0["peak_memory_gb"], w0["processes"]) == (True, 1.5, 2)
    assert (w1["worker"], w1["role"], w1["state"], w1["node"]) == (
        "scan-w1",
        "extra",
        "done",
        "node-a",
    )
    assert (w1["attempts"], w1["units_done"], w1["units_claimed"], w1["processes"]) == (1, 3, 0, 4)


def test_a_worker_killed_for_memory_without_a_live_pod_is_failed(lab: Lab) -> None:
    """S9: from the last report, a kill for memory is failed."""
    run = scenes.split_run(by=lab.person.identity)
    scenes.report(run, "scan-w0", oom_kills=1, exit_code=137)
    [worker] = lab.person.client.get(f"/api/runs/{run.id}/workers/").json()
    assert (worker["state"], worker["oom_killed"], worker["exit_code"]) == ("failed", True, 137)


def test_workers_of_an_unknown_task_are_404_with_the_known_ones(lab: Lab) -> None:
    """An unknown task is a resource that is not there (404), not a malformed request."""
    run = scenes.split_run(by=lab.person.identity)
    response = lab.person.client.get(f"/api/runs/{run.id}/workers/?task=nope")
    assert response.status_code == 404
    assert response.json()["code"] == "task_not_found"
    assert "has no task 'nope' (tasks: scan)" in response.json()["detail"]


def _output(run: Run, name: str, data: bytes) -> str:
    out = task_paths(run.id, "scan").out
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    (out / name).write_bytes(data)
    (out / ".simrun-merged").touch()
    return f"runs/{run.id}/tasks/scan/out/{name}"


def test_outputs_are_listed_relative_to_the_store(lab: Lab) -> None:
    """S10: output files with paths relative to the store; the merge marker is not one."""
    run = scenes.split_run(by=lab.person.identity, state="succeeded")
    table = _output(run, "table.csv", b"a,b\n1,2\n")
    plot = _output(run, "plots/p.png", b"png")
    body = lab.other.client.get(f"/api/runs/{run.id}/outputs/").json()
    assert [(f["path"], f["task"], f["size"]) for f in body["files"]] == [
        (plot, "scan", 3),
        (table, "scan", 8),
    ]
    assert body["truncated"] is False


def test_an_output_downloads_whole_or_by_byte_range(lab: Lab) -> None:
    """S10: a download; a Range header gets 206 and only those bytes."""
    run = scenes.split_run(by=lab.person.identity, state="succeeded")
    path = _output(run, "data.bin", bytes(range(100)))
    url = f"/api/runs/{run.id}/outputs/download/?path={path}"
    whole = lab.person.client.get(url)
    assert whole.status_code == 200
    assert b"".join(whole.streaming_content) == bytes(range(100))
    assert whole["Accept-Ranges"] == "bytes"
    part = lab.person.client.get(url, HTTP_RANGE="bytes=10-19")
    assert part.status_code == 206
    assert part["Content-Range"] == "bytes 10-19/100"
    assert b"".join(part.streaming_content) == bytes(range(10, 20))
    end = lab.person.client.get(url, HTTP_RANGE="bytes=-5")
    assert b"".join(end.streaming_content) == bytes(range(95, 100))
    beyond = lab.person.client.get(url, HTTP_RANGE="bytes=100-")
    assert beyond.status_code == 416


@pytest.mark.parametrize(
    "path",
    [
        "runs/{run}/tasks/scan/out/../task.json",
        "runs/{run}/tasks/scan/task.json",
        "runs/{other}/tasks/scan/out/data.bin",
        "runs/{run}/tasks/scan/out/link",
        "runs/{run}/tasks/scan/out/missing",
    ],
)
def test_only_files_inside_the_runs_outputs_download(lab: Lab, path: str) -> None:
    run = scenes.split_run(by=lab.person.identity, state="succeeded")
    other = scenes.split_run(by=lab.person.identity, state="succeeded")
    _output(other, "data.bin", b"secret")
    _output(run, "data.bin", b"ok")
    (task_paths(run.id, "scan").out / "link").symlink_to(task_paths(run.id, "scan").task_file)
    task_paths(run.id, "scan").task_file.write_text("{}")
    url = f"/api/runs/{run.id}/outputs/download/?path={path.format(run=run.id, other=other.id)}"
    response = lab.person.client.get(url)
    assert response.status_code == 404
    assert response.json()["code"] == "output_not_found"


def test_kept_logs_are_shown_every_attempt_or_their_tail(lab: Lab) -> None:
    """C12: once kept, the logs of a task's pods are read from the store."""
    run = factories.run(by=lab.person.identity, state="succeeded")
    logs = task_paths(run.id, "hello").logs
    logs.mkdir(parents=True)
    (logs / "hello-0.log").write_text("one\ntwo\nthree\n")
    (logs / "hello-1.log").write_text("again\n")
    entries = lab.other.client.get(f"/api/runs/{run.id}/logs/?task=hello").json()
    assert [(e["pod"], e["attempt"], e["text"], e["kept"]) for e in entries] == [
        ("hello", 0, "one\ntwo\nthree\n", True),
        ("hello", 1, "again\n", True),
    ]
    tail = lab.other.client.get(f"/api/runs/{run.id}/logs/?task=hello&tail=1").json()
    assert tail[0]["text"] == "three\n"


def test_empty_log_options_are_the_same_as_none(lab: Lab) -> None:
    """C12: `?tail=&follow=` (empty, as a form sends them) reads every line, not following."""
    run = factories.run(by=lab.person.identity, state="succeeded")
    logs = task_paths(run.id, "hello").logs
    logs.mkdir(parents=True)
    (logs / "hello-0.log").write_text("one\ntwo\n")

    entries = lab.other.client.get(f"/api/runs/{run.id}/logs/?task=hello&tail=&follow=").json()

    assert [e["text"] for e in entries] == ["one\ntwo\n"]


def test_following_the_logs_of_an_ended_task_streams_them_and_ends(lab: Lab) -> None:
    run = factories.run(by=lab.person.identity, state="succeeded")
    logs = task_paths(run.id, "hello").logs
    logs.mkdir(parents=True)
    (logs / "hello-0.log").write_text("one\ntwo\n")
    response = lab.person.client.get(f"/api/runs/{run.id}/logs/?task=hello&follow=true&tail=1")
    assert response["Content-Type"].startswith("text/plain")
    assert streamed(response) == b"[hello#0] two\n"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "task: give the task"),
        ("task=hello&tail=x", "tail:"),
        ("task=hello&follow=maybe", "follow:"),
    ],
)
def test_bad_log_queries_are_400(lab: Lab, query: str, message: str) -> None:
    run = factories.run(by=lab.person.identity, state="succeeded")
    response = lab.person.client.get(f"/api/runs/{run.id}/logs/?{query}")
    assert response.status_code == 400
    assert message in response.json()["detail"]
