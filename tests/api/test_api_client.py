"""`simrun`'s client of the API (`runs/cli/client.py`) over real HTTP, and uploads cut at the
ASGI edge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pytest_django import Settings

from runs.cli.client import ApiError, Client
from runs.models import Run, Snapshot
from runs.store import task_paths
from simrun_harness.layout import StorePaths
from tests import factories
from tests.api.conftest import Lab
from tests.api.live import serving
from tests.api.test_uploads import files_below

pytestmark = pytest.mark.django_db(transaction=True)

WORKFLOW = """\
name: hello
tasks:
  - id: hello
    type: command
    settings: {args: [python, model.py]}
"""


@pytest.fixture
def base_url() -> Iterator[str]:
    with serving() as url:
        yield url


@pytest.fixture
def source(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    (model / "pkg" / "__pycache__").mkdir(parents=True)
    (model / "model.py").write_text("print('hi')\n")
    (model / "pkg" / "a.py").write_text("A = 1\n")
    (model / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"\x00")
    (model / "same.py").symlink_to("model.py")
    return model


def test_submit_uploads_the_sources_and_returns_the_run(
    lab: Lab, base_url: str, source: Path, store: Path
) -> None:
    """S3: `simrun` snapshots --source directories through the API, then submits."""
    api = Client(base_url, lab.person.secret)
    run = api.submit(WORKFLOW, [source], group="study")
    assert (run["state"], run["group"], run["owner"]) == ("submitting", "study", "paul")
    [digest] = run["sources"]
    folder = StorePaths(store).snapshot(digest)
    assert sorted(p.name for p in folder.rglob("*.py")) == ["a.py", "model.py", "same.py"]
    assert not list(folder.rglob("*.pyc"))
    assert Snapshot.objects.get(digest=digest).source_path == str(source)
    assert [r["id"] for r in api.runs(owner="paul")] == [run["id"]]
    assert api.show(run["id"])["tasks"][0]["task_id"] == "hello"


def test_with_the_store_mounted_sources_are_written_there_and_registered(
    lab: Lab, base_url: str, source: Path, store: Path
) -> None:
    """Clients that mount the store (SIMRUN_STORE) write snapshots themselves."""
    digest = Client(base_url, lab.agent.secret, store=store).snapshot(source)
    assert (StorePaths(store).snapshot(digest) / "model.py").read_text() == "print('hi')\n"
    assert Snapshot.objects.get(digest=digest).created_by.name == "ada"  # type: ignore[union-attr]


def test_cancel_logs_and_outputs_through_the_client(lab: Lab, base_url: str) -> None:
    run = factories.run(by=lab.person.identity)
    paths = task_paths(run.id, "hello")
    paths.logs.mkdir(parents=True)
    (paths.logs / "hello-0.log").write_text("started\n")
    paths.out.mkdir()
    (paths.out / "result.txt").write_text("42\n")
    other = Client(base_url, lab.other.secret)
    with pytest.raises(ApiError) as refused:
        other.cancel(run.id)
    assert (refused.value.status, refused.value.code) == (403, "not_yours")
    [output] = other.outputs(run.id)
    assert output["path"] == f"runs/{run.id}/tasks/hello/out/result.txt"
    api = Client(base_url, lab.person.secret)
    cancelled = api.cancel(run.id)
    assert cancelled["state"] == "cancelled"
    assert [(t["id"], t["done"], t["total"]) for t in cancelled["tasks"]] == [("hello", 0, 1)]
    assert list(api.follow_logs(run.id, "hello")) == ["[hello#0] started"]
    [log] = api.logs(run.id, "hello")
    assert (log["pod"], log["attempt"], log["text"]) == ("hello", 0, "started\n")
    assert Run.objects.get(pk=run.pk).state == "cancelled"


def test_an_invalid_workflow_raises_with_every_error(lab: Lab, base_url: str) -> None:
    with pytest.raises(ApiError) as refused:
        Client(base_url, lab.person.secret).submit(
            "name: x\ntasks:\n  - id: a\n    type: nope\n", []
        )
    assert refused.value.code == "workflow_invalid"
    assert refused.value.errors[0]["line"] == 4
    assert refused.value.report().startswith("the workflow is invalid:\nline 4: task 'a': ")


def test_an_announced_oversized_upload_is_413_before_its_body_is_read(
    lab: Lab, base_url: str, store: Path, settings: Settings
) -> None:
    """S15: the ASGI edge refuses by Content-Length before Django reads the body."""
    settings.SIMRUN_MAX_UPLOAD_BYTES = 1000
    headers = {"Authorization": f"Bearer {lab.person.secret}", "Content-Type": "application/x-tar"}
    response = httpx.post(f"{base_url}/api/snapshots/", content=bytes(1001), headers=headers)
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert files_below(store) == []


def test_a_chunked_upload_is_cut_once_it_passes_the_limit(
    lab: Lab, base_url: str, store: Path, settings: Settings
) -> None:
    """S15: a body without a length is counted as it arrives and cut beyond the limit."""
    settings.SIMRUN_MAX_UPLOAD_BYTES = 100_000

    def body() -> Iterator[bytes]:
        for _ in range(20):
            yield bytes(10_000)

    headers = {"Authorization": f"Bearer {lab.person.secret}", "Content-Type": "application/x-tar"}
    response = httpx.post(f"{base_url}/api/snapshots/", content=body(), headers=headers)
    assert response.status_code == 413
    assert files_below(store) == []
    assert Snapshot.objects.count() == 0
