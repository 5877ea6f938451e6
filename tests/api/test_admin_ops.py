"""Servers, cleanup, store usage and comparisons."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from runs.backends import backend
from runs.models import Run
from runs.plans import PodShape, TaskPlan
from runs.ports import RunLaunch, TaskLaunch
from runs.store import run_paths
from runs.tasks import delete_run
from tests import factories
from tests.api.conftest import Lab
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db


def ended(days: float, **fields: object) -> Run:
    return factories.run(ended_at=timezone.now() - timedelta(days=days), **fields)  # type: ignore[arg-type]


def with_file(run: Run, name: str = "out.bin", size: int = 100) -> Path:
    path = run_paths(run.id).root / "tasks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


# --- servers --------------------------------------------------------------------------------


def test_servers_show_capacity_reservation_and_the_pods_of_runs(lab: Lab) -> None:
    """S8: capacity given to runs, GPUs, reservation, and the runs' pods with requests."""
    local = backend()
    node = local.nodes()[0].name
    shape = PodShape(cores=1, memory_gb=0.5)
    plan = TaskPlan(
        pods=1, shape=shape, base_priority="simrun-person", extra_priority="simrun-person-extra"
    )
    launch = RunLaunch(
        run_id="srvtest1",
        workflow_name="simrun-srvtest1",
        tasks=(TaskLaunch("wait", "command", False, (), plan, command=("sleep", "30")),),
        environment="service",
    )
    local.submit(launch)
    local.reserve(node, "srvtest1")
    try:
        wait_for(lambda: local.placements(), what="the pod to run")
        body = lab.other.client.get("/api/servers/").json()
        [server] = body["servers"]
        assert (server["name"], server["cores"], server["memory_gb"]) == (node, 4.0, 8.0)
        assert server["reserved_by"] == "srvtest1"
        assert [(p["run_id"], p["pod"], p["cores"]) for p in server["pods"]] == [
            ("srvtest1", "wait", 1.0)
        ]
        assert server["cores_used"] == 1.0
    finally:
        local.cancel("simrun-srvtest1")
        local.unreserve(node, "srvtest1")
        wait_for(lambda: not local.placements(), what="the pod to end")


# --- cleanup --------------------------------------------------------------------------------


def test_a_dry_run_cleanup_lists_what_would_go_and_removes_nothing(lab: Lab) -> None:
    """S12: by age, group, failed only; a dry run removes nothing."""
    old_failed = ended(10, by=lab.person.identity, state="failed", group="g")
    ended(10, by=lab.person.identity, state="succeeded", group="g")
    ended(1, by=lab.person.identity, state="failed", group="g")
    ended(10, by=lab.person.identity, state="failed", group="other")
    with_file(old_failed, size=42)
    body = lab.person.client.post(
        "/api/cleanup/",
        {"older_than_days": 7, "group": "g", "failed_only": True, "dry_run": True},
        format="json",
    ).json()
    assert (body["runs"], body["paths"], body["bytes_freed"]) == (
        [old_failed.id],
        [f"runs/{old_failed.id}"],
        42,
    )
    assert Run.objects.count() == 4


def test_a_cleanup_removes_old_ended_runs_it_may_change(lab: Lab) -> None:
    """S12: it says which runs it removes; a person cleans only their own runs, the owner all.
    The answer (202) marks them deleting and removes nothing itself: each run's `delete_run`
    task does (after releasing what the run still holds); a run being deleted is skipped."""
    mine = ended(30, by=lab.agent.identity, state="succeeded")
    theirs = ended(30, by=lab.other.identity, state="succeeded")
    releasing = ended(30, by=lab.person.identity, state="failed", pending_release=True)
    live = factories.run(by=lab.person.identity)
    with_file(mine)

    response = lab.person.client.post("/api/cleanup/", {"older_than_days": 7}, format="json")

    assert response.status_code == 202, response.json()
    body = response.json()
    assert (body["dry_run"], body["runs"], body["paths"], body["skipped"]) == (
        False,
        [mine.id, releasing.id],
        [f"runs/{mine.id}"],
        [],
    )
    assert set(Run.objects.filter(deleting=True).values_list("id", flat=True)) == {
        mine.id,
        releasing.id,
    }
    assert run_paths(mine.id).root.exists()
    delete_run(mine.id)  # what the worker runs
    assert not run_paths(mine.id).root.exists()
    assert set(Run.objects.values_list("id", flat=True)) == {theirs.id, releasing.id, live.id}
    by_owner = lab.owner.client.post("/api/cleanup/", {"older_than_days": 7}, format="json")
    assert (by_owner.json()["runs"], by_owner.json()["skipped"]) == (
        [theirs.id],
        [{"run": releasing.id, "reason": "it is being deleted already"}],
    )


def test_a_cleanup_needs_an_age(lab: Lab) -> None:
    response = lab.person.client.post("/api/cleanup/", {"older_than_days": -1}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("older_than_days:")


# --- usage ----------------------------------------------------------------------------------


def test_usage_counts_a_hard_linked_file_once(lab: Lab) -> None:
    """S13: bytes per run and per group; a hard-linked file counts once."""
    a = factories.run(by=lab.person.identity, group="study")
    b = factories.run(by=lab.person.identity, group="study")
    c = factories.run(by=lab.person.identity)
    shared = with_file(a, "shared.bin", 1000)
    with_file(b, "own.bin", 10)
    os.link(shared, run_paths(b.id).root / "tasks" / "linked.bin")
    os.link(shared, run_paths(a.id).root / "tasks" / "again.bin")
    with_file(c, "c.bin", 7)
    body = lab.other.client.get("/api/usage/").json()
    assert body["runs"] == {a.id: 1000, b.id: 1010, c.id: 7}
    assert body["groups"] == {"": 7, "study": 1010}
    assert body["total"] == 1017


# --- compare --------------------------------------------------------------------------------


def test_runs_compare_side_by_side_with_differences_marked(lab: Lab) -> None:
    """S14: settings, sources, environment, durations and resources, one value per run."""

    one = factories.run(by=lab.person.identity, group="a", environment={"ref": "env1"})
    two = factories.run(by=lab.other.identity, group="a", environment={"ref": "env2"})
    one.tasks.update(settings={"args": ["echo", "1"]})
    two.tasks.update(settings={"args": ["echo", "2"]})
    body = lab.agent.client.get(f"/api/compare/?runs={one.id},{two.id}").json()
    assert [r["id"] for r in body["runs"]] == [one.id, two.id]
    rows = {(r["section"], r["key"]): r for r in body["rows"]}
    assert rows[("settings", "hello.settings.args")]["values"] == [["echo", "1"], ["echo", "2"]]
    assert rows[("settings", "hello.settings.args")]["differs"] is True
    assert rows[("run", "group")] == {
        "section": "run",
        "key": "group",
        "values": ["a", "a"],
        "differs": False,
    }
    assert rows[("environment", "ref")]["values"] == ["env1", "env2"]
    assert ("durations", "hello.s") in rows


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [("runs=abc", 400, "give 2 to 20 run ids"), ("runs=abc,abc", 400, "named twice")],
)
def test_a_comparison_needs_two_distinct_runs(
    lab: Lab, query: str, status: int, message: str
) -> None:
    response = lab.person.client.get(f"/api/compare/?{query}")
    assert response.status_code == status
    assert message in response.json()["detail"]


@pytest.mark.parametrize("wrong", ["ab\x00c", "Abc", "a-b", "x" * 25])
def test_a_comparison_refuses_what_is_no_run_id_and_names_it(lab: Lab, wrong: str) -> None:
    """A NUL in an id reached the database (500); an id that cannot be a run's is refused."""
    run = factories.run(by=lab.person.identity)

    response = lab.person.client.get("/api/compare/", {"runs": f"{run.id},{wrong}"})

    assert response.status_code == 400
    assert response.json()["detail"] == (
        f"runs: {wrong!r} is no run id (1 to 24 lowercase letters and digits)"
    )


def test_comparing_an_unknown_run_is_404_naming_it(lab: Lab) -> None:
    run = factories.run(by=lab.person.identity)
    response = lab.person.client.get(f"/api/compare/?runs={run.id},nosuch")
    assert response.status_code == 404
    assert response.json()["detail"] == "no run 'nosuch'"


def test_freed_bytes_count_only_files_with_no_link_left(lab: Lab) -> None:
    """S13: deleting a run frees only the files none of whose links stays elsewhere."""
    kept = factories.run(by=lab.person.identity)
    gone = ended(30, by=lab.person.identity, state="succeeded")
    shared = with_file(gone, "shared.bin", 500)
    with_file(gone, "own.bin", 20)
    (run_paths(kept.id).root / "tasks").mkdir(parents=True)
    os.link(shared, run_paths(kept.id).root / "tasks" / "linked.bin")
    response = lab.person.client.post("/api/cleanup/", {"older_than_days": 7}, format="json")
    assert (response.json()["runs"], response.json()["bytes_freed"]) == ([gone.id], 20)
    delete_run(gone.id)
    assert (run_paths(kept.id).root / "tasks" / "linked.bin").read_bytes() == b"x" * 500


def test_usage_and_cleanup_never_follow_a_link_out_of_a_run(lab: Lab, tmp_path: Path) -> None:
    """A run's code made a directory of its run a link to a large directory outside the
    store, another made its whole run directory one: neither is counted, and deleting the
    runs removes the links only."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"x" * 5000)
    inner = ended(30, by=lab.person.identity, state="succeeded")
    with_file(inner, "own.bin", 20)
    (run_paths(inner.id).root / "tasks" / "out").symlink_to(outside)
    whole = ended(30, by=lab.person.identity, state="succeeded")
    run_paths(whole.id).root.parent.mkdir(parents=True, exist_ok=True)
    run_paths(whole.id).root.symlink_to(outside)

    body = lab.other.client.get("/api/usage/").json()
    assert body["runs"] == {inner.id: 20, whole.id: 0}
    assert body["total"] == 20
    cleanup = lab.person.client.post("/api/cleanup/", {"older_than_days": 7}, format="json")
    assert cleanup.json()["bytes_freed"] == 20
    delete_run(inner.id)
    delete_run(whole.id)
    assert not os.path.lexists(run_paths(whole.id).root)
    assert (outside / "big.bin").stat().st_size == 5000
