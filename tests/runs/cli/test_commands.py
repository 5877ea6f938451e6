"""The `simrun` command: what a person typing it sees."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pytest_django import Settings

from runs.backends import backend
from runs.cli.main import main
from runs.models import Identity, Run, Task, Token
from runs.services.identities import identity_for_token
from runs.states import RunState, TaskState
from tests import factories

ROOT = Path(__file__).resolve().parents[3]


def simrun(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runs.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_validate_prints_ok_and_the_task_order() -> None:
    result = simrun("validate", str(ROOT / "examples" / "workflows" / "repressilator.yaml"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ok: repressilator-scan (2 tasks)",
        "order: scan -> summary",
    ]


def test_validate_prints_each_error_on_its_line_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\ntasks:\n  - id: scan\n    type: ode_scan\n    settings: {chunk: 0}\n")
    result = simrun("validate", str(bad))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert (
        f"{bad}:5: task 'scan': settings.chunk: Input should be greater than or equal to 1" in lines
    )
    assert f"{bad}:5: task 'scan': settings.parameters: Field required" in lines


def test_validate_of_a_missing_file_says_so(tmp_path: Path) -> None:
    result = simrun("validate", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1
    assert "cannot read" in result.stderr and "No such file" in result.stderr


@pytest.mark.django_db
def test_token_create_shows_the_secret_once_and_list_shows_only_the_prefix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["person", "create", "paul"]) == 0
    capsys.readouterr()
    assert main(["token", "create", "paul", "--label", "laptop"]) == 0
    secret = capsys.readouterr().out.splitlines()[0]
    assert identity_for_token(secret) == Identity.objects.get(name="paul")
    assert main(["token", "list"]) == 0
    listing = capsys.readouterr().out
    assert Token.objects.get().prefix in listing
    assert secret not in listing


@pytest.mark.django_db
def test_token_revoke_refuses_the_token_afterwards(capsys: pytest.CaptureFixture[str]) -> None:
    main(["owner", "create", "olivia"])
    main(["token", "create", "olivia"])
    secret = capsys.readouterr().out.splitlines()[1]
    assert main(["token", "revoke", str(Token.objects.get().pk)]) == 0
    assert identity_for_token(secret) is None


@pytest.mark.django_db
def test_an_agent_needs_the_person_it_acts_for(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "create", "ada", "--acts-for", "nobody"]) == 1
    assert "acts_for 'nobody' is not a person or the owner" in capsys.readouterr().err
    assert not Identity.objects.filter(name="ada").exists()


@pytest.mark.django_db
def test_token_import_reads_a_tokens_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S17: tokens load from a YAML file of people and agents."""
    file = tmp_path / "tokens.yaml"
    file.write_text(
        "owner: olivia\npeople:\n  - {name: paul, tokens: [srn_p]}\n"
        "agents:\n  - {name: ada, acts_for: paul, tokens: [srn_a]}\n"
    )
    assert main(["token", "import", str(file)]) == 0
    assert "imported: 3 identities, 2 tokens" in capsys.readouterr().out
    assert identity_for_token("srn_a") == Identity.objects.get(name="ada")


def test_submit_of_a_task_whose_scratch_fits_no_server_exits_1_creating_nothing(
    simrun_api: str, settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal at submission names what the task asks and the server with most scratch."""
    settings.SIMRUN_BACKEND = "local"
    settings.SIMRUN_LOCAL_CORES = 4.0
    settings.SIMRUN_LOCAL_MEMORY_GB = 8.0
    backend.cache_clear()
    workflow = tmp_path / "hog.yaml"
    workflow.write_text(
        "name: hog\n"
        "tasks:\n"
        "  - {id: hello, type: command, settings: {args: ['true']},"
        " resources: {scratch_gb: 100000}}\n"
    )
    try:
        assert main(["submit", str(workflow)]) == 1
    finally:
        backend.cache_clear()
    err = capsys.readouterr().err
    assert "100000 GiB scratch" in err and "no node has room for its scratch" in err
    assert not Run.objects.exists()


def test_a_port_that_is_no_port_is_named_and_other_commands_still_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIMRUN_PORT=abc: `serve` says in one line which setting is wrong and what is allowed
    (exit 2, nothing started); `validate`, which has no port, is not stopped by it."""
    monkeypatch.setenv("SIMRUN_PORT", "abc")
    with pytest.raises(SystemExit) as stopped:
        main(["serve"])
    assert stopped.value.code == 2
    assert "'abc' is not a port (--port or SIMRUN_PORT: a whole number from 1 to 65535)" in (
        capsys.readouterr().err
    )
    workflow = ROOT / "examples" / "workflows" / "repressilator.yaml"
    assert main(["validate", str(workflow)]) == 0
    with pytest.raises(SystemExit):
        main(["demo", "--port", "70000"])
    assert "'70000' is not a port" in capsys.readouterr().err


def test_show_prints_when_each_task_started_and_ended_and_how_long_it_took(
    simrun_api: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`show` gives each task's start, end (local time) and duration from its record, as the
    API answers it: the times are the rows', whatever pods made them."""
    start = datetime.fromisoformat("2026-12-04T09:15:02.250+00:00")
    run = factories.run(state=RunState.SUCCEEDED, started_at=start)
    run.tasks.filter(task_id="hello").update(
        state=TaskState.DONE, started_at=start, ended_at=start + timedelta(seconds=61.26)
    )
    Task.objects.create(
        run=run,
        task_id="after",
        position=1,
        type="command",
        state=TaskState.DONE,
        started_at=start + timedelta(seconds=62),
        ended_at=start + timedelta(seconds=62.04),
    )

    assert main(["show", run.pk]) == 0

    shown = capsys.readouterr().out.splitlines()
    for task in run.tasks.all():
        assert task.started_at and task.ended_at
        line = next(t for t in shown if t.split()[:1] == [task.task_id])
        clock = re.search(r"started (\S+)  ended (\S+)  took ([0-9.]+)s", line)
        assert clock, line
        local = [m.astimezone().strftime("%H:%M:%S") for m in (task.started_at, task.ended_at)]
        assert [clock[1], clock[2]] == local
        assert float(clock[3]) == round((task.ended_at - task.started_at).total_seconds(), 1)


def test_logs_say_on_stderr_how_much_of_a_cut_log_is_not_shown(
    simrun_api: str, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log longer than its share of an answer is printed from its end, and `logs` says
    how many bytes before it were left out and why, apart from the log's own lines."""
    from runs.store import task_paths

    settings.SIMRUN_LOG_ANSWER_MAX_BYTES = 64 * 1024
    run = factories.run(state=RunState.SUCCEEDED)
    logs = task_paths(run.pk, "hello").logs
    logs.mkdir(parents=True)
    (logs / "hello-0.log").write_text("".join(f"line {n}\n" for n in range(20_000)))
    (logs / "hello-1.log").write_text("short\n")

    assert main(["logs", run.pk, "hello"]) == 0

    printed = capsys.readouterr()
    assert printed.out.endswith("line 19999\n==> hello-1 <==\nshort\n")
    assert "line 0\n" not in printed.out
    left_out = 208_890 - len(printed.out.split("==> hello-1 <==")[0].split("<==\n", 1)[1])
    assert printed.err.splitlines() == [
        f"simrun: hello-0: its first {left_out:,} bytes are not shown (an answer holds at most "
        "SIMRUN_LOG_ANSWER_MAX_BYTES of a task's logs, each log its share from its end); "
        "--tail N prints a log's last N lines"
    ]
