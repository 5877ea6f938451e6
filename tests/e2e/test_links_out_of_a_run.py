"""A run whose code replaces its files with links serves nothing from outside its store.

`simrun serve` as installed (the secret key and the owner's `cli_token` in its data
directory), a `command` run submitted over HTTP whose tasks replace `out/` with a link to `/`,
their live logs with links to `/etc/shadow` and `/proc/self/environ`, and the log the service
keeps at the end with a link to a file of someone else. Every read a client can make over HTTP
(outputs listed and downloaded, logs read and followed) answers without a byte of those files,
and the service writes nothing through a link.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.serving import serving
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

ENDED = ("succeeded", "failed", "cancelled")

# `a` links its output to /, its live log to /etc/shadow; `b` its live log to the web
# process's environment and the log kept at the end to a file outside the store
ATTACK = r"""
set -e
rm -rf "$SIMRUN_TASK_DIR/out" && ln -s / "$SIMRUN_TASK_DIR/out"
for log in "$SIMRUN_RUN_DIR"/pods/"$SIMRUN_TASK"/*/log; do
  rm -f "$log" && ln -s "$LIVE_TARGET" "$log"
done
mkdir -p "$SIMRUN_TASK_DIR/logs"
ln -s "$KEPT_TARGET" "$SIMRUN_TASK_DIR/logs/$SIMRUN_TASK-0.log"
"""


def _task(task_id: str, live: str, kept: str) -> dict[str, Any]:
    settings = {
        "args": ["sh", "-c", ATTACK],
        "env": {"SIMRUN_TASK": task_id, "LIVE_TARGET": live, "KEPT_TARGET": kept},
    }
    return {"id": task_id, "type": "command", "settings": settings}


def test_a_run_that_links_its_files_out_of_the_store_serves_none_of_them(tmp_path: Path) -> None:
    decoy = tmp_path / "someone-elses-file"
    decoy.write_text("nobody may read or write this\n")
    workflow = {
        "name": "links",
        "tasks": [
            _task("a", "/etc/shadow", str(decoy)),
            _task("b", "/proc/self/environ", str(decoy)),
        ],
    }
    with serving(tmp_path) as served:
        data = served.data_dir
        secrets = {
            "secret_key": (data / "secret_key").read_bytes().strip(),
            "cli_token": (data / "cli_token").read_bytes().strip(),
            "shadow": Path("/etc/shadow").read_bytes().split(b"\n")[0],
            "environ": f"SIMRUN_DATA_DIR={data}".encode(),
        }
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{served.port}",
            headers={"Authorization": f"Bearer {secrets['cli_token'].decode()}"},
            timeout=60,
        )
        created = client.post("/api/runs/", json={"workflow": workflow})
        assert created.status_code == 201, created.text
        run = created.json()["id"]
        wait_for(
            lambda: client.get(f"/api/runs/{run}/").json().get("state") in ENDED,
            timeout=240,
            interval=0.5,
            what="the run to end",
        )
        for task in ("a", "b"):
            wait_for(
                lambda task=task: (
                    all(  # type: ignore[misc]
                        e["kept"] for e in client.get(f"/api/runs/{run}/logs/?task={task}").json()
                    )
                    and client.get(f"/api/runs/{run}/logs/?task={task}").json()
                ),
                timeout=120,
                interval=0.5,
                what=f"the logs of {task} kept",
            )
        served_bytes: list[bytes] = []
        listing = client.get(f"/api/runs/{run}/outputs/")
        assert listing.status_code == 200, listing.text
        assert listing.json()["files"] == []
        served_bytes.append(listing.content)
        below_root = os.path.relpath(data, "/")
        for path in (
            f"{below_root}/secret_key",
            f"{below_root}/cli_token",
            "etc/shadow",
            "proc/self/environ",
        ):
            url = f"/api/runs/{run}/outputs/download/?path=runs/{run}/tasks/a/out/{path}"
            download = client.get(url)
            assert download.status_code == 404, (path, download.status_code)
            assert download.json()["code"] == "output_not_found"
            served_bytes.append(download.content)
        for task in ("a", "b"):
            served_bytes.append(client.get(f"/api/runs/{run}/logs/?task={task}").content)
            followed = client.get(f"/api/runs/{run}/logs/?task={task}&follow=true")
            served_bytes.append(followed.content)
        assert decoy.read_text() == "nobody may read or write this\n"

    for name, secret in secrets.items():
        assert not any(secret in body for body in served_bytes), name
