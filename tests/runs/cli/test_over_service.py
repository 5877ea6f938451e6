"""`simrun submit|show|runs|cancel` reach the running `simrun serve` over HTTP, set no Django
up for it, and say the same as the direct way; without a usable service they work directly.

The direct way is asked with SIMRUN_IDENTITY set to the owner (the service's token is the
owner's, so that variable keeps a command off the service)."""

from __future__ import annotations

import getpass
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from runs.cli.local_service import write_token
from runs.cli.service_state import ServeRecord, write_state
from runs.states import RunState
from tests.e2e.commands import ROOT, SIMRUN, clean_env, free_port
from tests.e2e.serving import Serving, serving, small_workflow
from tests.waiting import wait_for

PROBE = """
import json, sys
from runs.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "django": sorted(m for m in sys.modules if m == "django")}))
"""
INVALID = "name: bad\ntasks:\n  - id: t\n    type: sleep\n    settings: {units: 0, colour: red}\n"
TEXT: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 300}
VALID = "name: wide\ntasks:\n  - id: t\n    type: sleep\n    settings: {units: 2}\n"
TOO_WIDE = VALID + "    resources: {scratch_gb: 100000}\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("over-service")) as service:
        yield service


def simrun(
    data_dir: Path,
    *args: str,
    direct: bool = False,
    probe: bool = False,
    extra: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {**clean_env(data_dir), **(extra or {})}
    if direct:
        env["SIMRUN_IDENTITY"] = getpass.getuser()
    command = [sys.executable, "-c", PROBE, *args] if probe else [str(SIMRUN), *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def said(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return done.returncode, done.stdout, done.stderr


def test_serve_keeps_a_private_token_and_records_its_store(served: Serving) -> None:
    record = json.loads((served.data_dir / "services.json").read_text())
    assert record["store"] == str(served.data_dir / "store")
    token = served.data_dir / "cli_token"
    assert token.read_text().startswith("srn_") and token.stat().st_mode & 0o777 == 0o600


def test_submit_and_show_over_the_service_load_no_django(served: Serving, tmp_path: Path) -> None:
    workflow = small_workflow(tmp_path, units=2, seconds=0.1)
    submitted = simrun(served.data_dir, "submit", str(workflow), probe=True)
    assert submitted.returncode == 0, submitted.stderr
    lines = submitted.stdout.splitlines()
    assert json.loads(lines[-1]) == {"code": 0, "django": []}
    run_id = lines[0].split()[2]  # "submitted run <id> (small)"
    shown = simrun(served.data_dir, "show", run_id, probe=True)
    assert json.loads(shown.stdout.splitlines()[-1]) == {"code": 0, "django": []}
    assert shown.stdout.startswith(f"run {run_id}  small  ")
    # the direct way loads Django: the probe tells the two apart
    direct = simrun(served.data_dir, "show", run_id, probe=True, direct=True)
    assert json.loads(direct.stdout.splitlines()[-1]) == {"code": 0, "django": ["django"]}


def test_a_run_made_over_the_service_shows_and_lists_the_same_either_way(
    served: Serving, tmp_path: Path
) -> None:
    workflow = small_workflow(tmp_path, units=2, seconds=30)
    code, out, err = said(
        simrun(served.data_dir, "submit", str(workflow), "--source", str(tmp_path / "model"))
    )
    assert code == 0, err
    run_id = out.split()[2]
    assert said(simrun(served.data_dir, "cancel", run_id)) == (0, f"run {run_id} cancelled\n", "")

    def settled() -> str | None:
        shown = simrun(served.data_dir, "show", run_id).stdout
        tasks = [line for line in shown.splitlines() if line.startswith("  naps ")]
        return shown if tasks and "cancelled" in tasks[0] and "ended -" not in tasks[0] else None

    shown = wait_for(settled, timeout=60, what="the cancelled run's task to end")
    assert said(simrun(served.data_dir, "show", run_id, direct=True)) == (0, shown, "")

    def unmoving() -> subprocess.CompletedProcess[str] | None:
        """The list once none of its runs is live: the runs of earlier tests on this service
        are listed too, and one still running could move between the two listings."""
        listed = simrun(served.data_dir, "runs", "--limit", "3")
        return None if set(listed.stdout.split()) & set(RunState.live()) else listed

    listed = wait_for(unmoving, timeout=60, what="the listed runs to have ended")
    assert listed is not None
    assert said(simrun(served.data_dir, "runs", "--limit", "3", direct=True)) == said(listed)
    again = (1, "", f"simrun: run {run_id} has ended (cancelled); there is nothing to cancel\n")
    assert said(simrun(served.data_dir, "cancel", run_id)) == again
    assert said(simrun(served.data_dir, "cancel", run_id, direct=True)) == again


@pytest.mark.parametrize(
    "case",
    ["invalid workflow", "no server fits", "missing source", "unknown run"],
)
def test_refusals_are_the_same_lines_and_exit_codes_either_way(
    served: Serving, tmp_path: Path, case: str
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text({"no server fits": TOO_WIDE, "missing source": VALID}.get(case, INVALID))
    args = {
        "invalid workflow": ["submit", str(path)],
        "no server fits": ["submit", str(path)],
        "missing source": ["submit", str(path), "--source", str(tmp_path / "nowhere")],
        "unknown run": ["show", "nosuchrun"],
    }[case]
    over_service = said(simrun(served.data_dir, *args))
    assert over_service[0] == 1 and over_service[2].startswith("simrun: ")
    assert said(simrun(served.data_dir, *args, direct=True)) == over_service


@pytest.fixture
def elsewhere(served: Serving, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Another data directory on the served installation's database (no migration to wait
    for), whose state file the test writes."""
    database = f"sqlite:///{served.data_dir / 'simrun.sqlite3'}"
    return tmp_path / "simrun", {"DATABASE_URL": database}


def claim_service(data_dir: Path, *, pid: int, url: str, token: str) -> None:
    """A state file as `serve` writes it, naming `pid` as the serve process."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    started = psutil.Process(pid).create_time() if psutil.pid_exists(pid) else 0.0
    record = ServeRecord(pid=pid, started=started, url=url, store=str(data_dir / "store"))
    write_state(data_dir, record)
    write_token(data_dir, token)


def test_a_state_file_left_by_a_dead_serve_is_ignored(
    elsewhere: tuple[Path, dict[str, str]],
) -> None:
    data_dir, env = elsewhere
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **TEXT)
    claim_service(data_dir, pid=int(dead.stdout), url="http://127.0.0.1:9/", token="srn_x")
    expected = (1, "", "simrun: no run 'nosuchrun'\n")
    assert said(simrun(data_dir, "show", "nosuchrun", extra=env)) == expected


def test_a_service_that_does_not_answer_is_named_and_the_command_works_directly(
    elsewhere: tuple[Path, dict[str, str]],
) -> None:
    data_dir, env = elsewhere
    url = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    claim_service(data_dir, pid=os.getpid(), url=url, token="srn_x")
    code, out, err = said(simrun(data_dir, "show", "nosuchrun", extra=env))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"simrun: the service at {url} does not answer ([Errno 111] Connection refused); "
        "working on this machine's database directly",
        "simrun: no run 'nosuchrun'",
    ]


def test_a_refused_token_is_named_and_the_command_works_directly(
    elsewhere: tuple[Path, dict[str, str]], served: Serving
) -> None:
    data_dir, env = elsewhere
    url = f"http://127.0.0.1:{served.port}/"
    claim_service(data_dir, pid=os.getpid(), url=url, token="srn_not-a-token")
    code, out, err = said(simrun(data_dir, "runs", extra=env))
    assert code == 0 and out.startswith("RUN ")
    assert err.startswith(f"simrun: the service at {url} refuses this machine's token (")


def test_a_service_that_breaks_off_is_an_error_and_nothing_is_done_again_directly(
    elsewhere: tuple[Path, dict[str, str]],
) -> None:
    """Once a request may have been sent, a lost answer is not retried the direct way (a
    submission would be made twice)."""
    data_dir, env = elsewhere
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"

        def hang_up() -> None:
            connection, _ = listener.accept()
            connection.recv(65536)
            connection.close()

        thread = threading.Thread(target=hang_up, daemon=True)
        thread.start()
        claim_service(data_dir, pid=os.getpid(), url=url, token="srn_x")
        code, out, err = said(simrun(data_dir, "show", "nosuchrun", extra=env))
        thread.join(timeout=60)
    assert (code, out) == (1, "")
    assert err == (
        f"simrun: the service at {url} broke off (Remote end closed connection without "
        "response); `simrun runs` shows what it did\n"
    )
