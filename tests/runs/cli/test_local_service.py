"""`simrun`'s run verbs against this machine's `simrun serve`, as a user in another terminal
runs them: over HTTP with the token serve keeps, their output the API's answer."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from runs.cli.service_state import ServeRecord, write_state, write_token
from runs.states import RunState
from tests.e2e.commands import ROOT, SIMRUN, clean_env, free_port, kill_all, processes_of
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
    with serving(tmp_path_factory.mktemp("local-service")) as service:
        yield service


@pytest.fixture(scope="module")
def succeeded(served: Serving, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A run of two units that succeeded on the service (its merge wrote the marker)."""
    folder = tmp_path_factory.mktemp("succeeded")
    workflow = small_workflow(folder, units=2, seconds=0.05)
    submitted = served.simrun("submit", str(workflow), "--source", str(folder / "model"))
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.split()[2]  # "submitted run <id> (small)"

    def ended() -> str | None:
        shown = served.simrun("show", run_id).stdout.split()
        return next((s for s in RunState.ended() if s in shown[:4]), None)

    assert wait_for(ended, timeout=120, what="the run to end") == RunState.SUCCEEDED
    return run_id


def test_serve_keeps_a_private_token_and_records_its_store(served: Serving) -> None:
    record = json.loads((served.data_dir / "services.json").read_text())
    assert record["store"] == str(served.data_dir / "store")
    token = served.data_dir / "cli_token"
    assert token.read_text().startswith("srn_") and token.stat().st_mode & 0o777 == 0o600


def _opened(url: str, opener: urllib.request.OpenerDirector) -> tuple[int, str]:
    try:
        with opener.open(url, timeout=60) as reply:
            return reply.status, reply.geturl()
    except urllib.error.HTTPError as error:
        return error.code, url


def test_serve_prints_a_one_time_login_link_to_the_pages_and_the_admin(served: Serving) -> None:
    """The owner has no password: serve prints a link that logs in as the owner once, who is
    an operator (the admin opens too); `simrun login` prints another."""
    link = r"^pages: (http://\S+/login/link/\S+/)  \(logs in as "
    # said right after "serving on", once the link's token is in the database
    found = wait_for(
        lambda: re.search(link, served.said()[0], re.M), timeout=60, what="the login link"
    )
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())

    assert _opened(found[1], browser) == (200, f"http://127.0.0.1:{served.port}/")
    assert _opened(f"http://127.0.0.1:{served.port}/admin/", browser)[0] == 200
    again = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    assert _opened(found[1], again)[0] == 410  # once only
    printed = served.simrun("login")
    assert printed.returncode == 0, printed.stderr
    fresh = printed.stdout.split()[0]
    assert fresh != found[1] and _opened(fresh, again)[0] == 200


def test_outputs_are_the_files_full_paths_without_the_merge_marker(
    served: Serving, succeeded: str
) -> None:
    """As the demo's summary lists them: paths a user can open, and only the task's files."""
    listed = served.simrun("outputs", succeeded)
    assert listed.returncode == 0, listed.stderr
    out = served.data_dir / "store" / "runs" / succeeded / "tasks" / "naps" / "out"
    assert (out / ".simrun-merged").is_file()
    files = sorted(str(p) for p in out.rglob("*") if p.is_file() and p.name != ".simrun-merged")
    assert files and listed.stdout.splitlines() == files


def test_a_listing_into_a_closed_pipe_ends_quietly(served: Serving, succeeded: str) -> None:
    """`simrun runs | head`: the reader went away; no traceback, the exit status of a
    command ended by SIGPIPE."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    try:
        done = subprocess.run(
            [str(SIMRUN), "runs"],
            cwd=ROOT,
            env=clean_env(served.data_dir),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def test_show_over_the_service_sets_no_django_up(served: Serving, succeeded: str) -> None:
    shown = subprocess.run(
        [sys.executable, "-c", PROBE, "show", succeeded],
        cwd=ROOT,
        env=clean_env(served.data_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = shown.stdout.splitlines()
    assert json.loads(lines[-1]) == {"code": 0, "django": []}, shown.stderr
    assert lines[0].startswith(f"run {succeeded}  small  succeeded  owner ")


def test_logs_print_each_attempt_under_its_header_and_follow_ends_with_the_task(
    served: Serving, succeeded: str
) -> None:
    logs = served.simrun("logs", succeeded, "naps")
    assert logs.returncode == 0, logs.stderr
    headers = [line for line in logs.stdout.splitlines() if line.startswith("==> ")]
    assert headers and all(re.fullmatch(r"==> naps-(w\d+|merge)-\d+ <==", h) for h in headers)
    followed = served.simrun("logs", succeeded, "naps", "--follow")
    assert followed.returncode == 0, followed.stderr
    prefixed = [line.partition(" ") for line in followed.stdout.splitlines()]
    assert all(re.fullmatch(r"\[naps-(w\d+|merge)#\d+\]", p[0]) for p in prefixed)
    body = [line for line in logs.stdout.splitlines() if line not in headers]
    assert body and [p[2] for p in prefixed] == body


def test_compare_prints_the_rows_that_differ_by_section(
    served: Serving, succeeded: str, tmp_path: Path
) -> None:
    workflow = small_workflow(tmp_path, units=3, seconds=30)
    submitted = served.simrun("submit", str(workflow))
    other = submitted.stdout.split()[2]
    assert served.simrun("cancel", other).returncode == 0
    compared = served.simrun("compare", succeeded, other)
    assert compared.returncode == 0, compared.stderr
    lines = compared.stdout.splitlines()
    assert lines[0].split() == ["FIELD", succeeded, other]
    assert "[run]" in lines and "[settings]" in lines
    assert re.search(r"^naps\.settings\.units +2 +3$", compared.stdout, re.M), compared.stdout
    assert not re.search(r"^naps\.type ", compared.stdout, re.M)  # the same in both
    every = served.simrun("compare", succeeded, other, "--all").stdout
    assert re.search(r"^naps\.type +sleep +sleep$", every, re.M), every


def test_estimate_prints_each_tasks_plan(served: Serving, tmp_path: Path) -> None:
    workflow = small_workflow(tmp_path, units=5)
    estimated = served.simrun("estimate", str(workflow), "--source", str(tmp_path / "model"))
    assert estimated.returncode == 0, estimated.stderr
    header, row = estimated.stdout.splitlines()
    assert header.split() == ["TASK", "TYPE", "UNITS", "PODS", "CORES", "MEMORY", "TIME"]
    assert row.split()[:3] == ["naps", "sleep", "5"]


@pytest.mark.parametrize(
    "case", ["invalid workflow", "no server fits", "missing source", "unknown run"]
)
def test_refusals_are_one_message_and_exit_1(served: Serving, tmp_path: Path, case: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text({"no server fits": TOO_WIDE, "missing source": VALID}.get(case, INVALID))
    args, said = {
        "invalid workflow": (
            ["submit", str(path)],
            "simrun: the workflow is invalid:\nline 5: task 't': settings.colour: unknown setting"
            " (allowed: merge_seconds, seconds, units)\nline 5: task 't': settings.units: ",
        ),
        "no server fits": (["submit", str(path)], "simrun: one pod asks for 1 core, "),
        "missing source": (
            ["submit", str(path), "--source", str(tmp_path / "nowhere")],
            f"simrun: --source {tmp_path / 'nowhere'}: not a directory\n",
        ),
        "unknown run": (["show", "nosuchrun"], "simrun: no run 'nosuchrun'\n"),
    }[case]
    done = served.simrun(*args)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(said), done.stderr


@pytest.fixture
def elsewhere(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Another installation's data directory, whose state file the test writes."""
    data_dir = tmp_path / "simrun"
    return data_dir, {**clean_env(data_dir), "SIMRUN_AUTOSTART": "false"}


def claim_service(data_dir: Path, *, pid: int, url: str, token: str) -> None:
    """A state file as `serve` writes it, naming `pid` as the serve process."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    started = psutil.Process(pid).create_time() if psutil.pid_exists(pid) else 0.0
    record = ServeRecord(pid=pid, started=started, url=url, store=str(data_dir / "store"))
    write_state(data_dir, record)
    write_token(data_dir, token)


def run_in(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = subprocess.run([str(SIMRUN), *args], cwd=ROOT, env=env, **TEXT)
    return done.returncode, done.stdout, done.stderr


def test_with_no_serve_running_and_autostart_off_the_command_names_what_starts_it(
    elsewhere: tuple[Path, dict[str, str]],
) -> None:
    """A state file left by a serve that has died counts as none."""
    data_dir, env = elsewhere
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **TEXT)
    claim_service(data_dir, pid=int(dead.stdout), url="http://127.0.0.1:9/", token="srn_x")
    assert run_in(env, "show", "nosuchrun") == (
        1,
        "",
        f"simrun: simrun is not running here ({data_dir}): start it with `simrun serve` "
        "(or leave SIMRUN_AUTOSTART unset to have commands start it)\n",
    )


def test_a_service_that_does_not_answer_is_named(elsewhere: tuple[Path, dict[str, str]]) -> None:
    data_dir, env = elsewhere
    url = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    claim_service(data_dir, pid=os.getpid(), url=url, token="srn_x")
    assert run_in(env, "show", "nosuchrun") == (
        1,
        "",
        f"simrun: simrun at {url} does not answer ([Errno 111] Connection refused)\n",
    )


def test_a_refused_token_is_named_with_what_renews_it(
    elsewhere: tuple[Path, dict[str, str]], served: Serving
) -> None:
    data_dir, env = elsewhere
    claim_service(
        data_dir, pid=os.getpid(), url=f"http://127.0.0.1:{served.port}/", token="srn_nope"
    )
    code, out, err = run_in(env, "runs")
    assert (code, out) == (1, "")
    assert err.startswith("simrun: the token is refused (") and "SIMRUN_TOKEN" in err


def test_a_service_that_breaks_off_is_named_and_nothing_is_retried(
    elsewhere: tuple[Path, dict[str, str]],
) -> None:
    data_dir, env = elsewhere
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        requests: list[bytes] = []

        def hang_up() -> None:
            connection, _ = listener.accept()
            requests.append(connection.recv(65536))
            connection.close()

        thread = threading.Thread(target=hang_up, daemon=True)
        thread.start()
        claim_service(data_dir, pid=os.getpid(), url=url, token="srn_x")
        said = run_in(env, "show", "nosuchrun")
        thread.join(timeout=60)
    assert said == (
        1,
        "",
        f"simrun: simrun at {url} broke off (Remote end closed connection without response)\n",
    )
    assert len(requests) == 1


@pytest.mark.slow
def test_with_no_serve_running_a_command_starts_one_in_the_background(
    installed: Path, tmp_path: Path
) -> None:
    """It says so in one line, answers, and the serve it left is stopped by `simrun stop`."""
    data_dir = tmp_path / "simrun"
    shutil.copytree(installed, data_dir)  # an installation whose serve is not running
    env = clean_env(data_dir)
    try:
        code, out, err = run_in(env, "runs")
        assert (code, out.splitlines()[0].split()[:2]) == (0, ["RUN", "NAME"]), err
        assert err == (
            f"simrun: started `simrun serve` in the background for {data_dir} (log: "
            f"{data_dir / 'logs' / 'serve.log'}; `simrun stop` stops it)\n"
        )
        assert run_in(env, "runs")[2] == ""  # the second finds it running
        assert run_in(env, "stop")[0] == 0
        wait_for(lambda: not processes_of(data_dir), timeout=60, what="serve and its services gone")
    finally:
        kill_all(data_dir)
