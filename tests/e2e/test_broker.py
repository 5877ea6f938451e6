"""The embedded default's file broker: no message can take the Celery worker down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.commands import ROOT
from tests.e2e.serving import serving, small_workflow
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

PRODUCERS = 3
EACH = 30
PADDING = 1_000_000  # a message file big enough to be caught half written without the fix
PACE = 0.2  # producers slower than the consumer, so it meets each message as it appears


def test_unreadable_messages_are_set_aside_and_the_worker_goes_on(tmp_path: Path) -> None:
    """An empty and a garbage message dropped into the queue while `simrun serve` runs: the
    worker logs each once and moves it to broker/bad/, stays up (same process, no restart),
    and a run submitted afterwards succeeds."""
    with serving(tmp_path) as served:
        worker = served.service("worker")
        queue = served.data_dir / "broker" / "in"
        (queue / "1_empty.simrun.msg").write_bytes(b"")
        (queue / "2_garbage.simrun.msg").write_bytes(b"\x00{not json")
        bad = served.data_dir / "broker" / "bad"
        wait_for(
            lambda: (
                {p.name for p in bad.iterdir()} == {"1_empty.simrun.msg", "2_garbage.simrun.msg"}
            ),
            timeout=60,
            what="both unreadable messages set aside",
        )
        submitted = served.simrun(
            "submit",
            str(small_workflow(tmp_path)),
            "--source",
            str(tmp_path / "model"),
            "--follow",
        )

        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert "succeeded" in submitted.stdout
        assert worker.is_running() and served.service("worker").pid == worker.pid
        log = (served.data_dir / "logs" / "worker.log").read_text()
        assert log.count("an unreadable message was set aside") == 2, log
        assert "Unrecoverable error" not in log
        assert "restarting" not in served.said()[1]


def test_producers_publishing_while_the_worker_consumes_lose_nothing(tmp_path: Path) -> None:
    """Three producer processes publish 30 messages each (big enough to take a while to write)
    while a Celery worker consumes them: the worker stays up, every message is consumed once."""
    records = tmp_path / "records"
    records.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CELERY_")},  # its broker
        "BROKER_TEST_DIR": str(tmp_path / "broker"),
        "BROKER_TEST_RECORDS": str(records),
        "PYTHONUNBUFFERED": "1",
    }
    for sub in ("in", "control"):
        (tmp_path / "broker" / sub).mkdir(parents=True)
    celery = Path(sys.executable).parent / "celery"
    with (tmp_path / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            [
                str(celery),
                "-A",
                "tests.e2e.broker_app",
                "worker",
                "--concurrency",
                "2",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    publish = (
        "import sys, time; from tests.e2e.broker_app import record\n"
        "first = int(sys.argv[1])\n"
        f"for i in range(first, first + {EACH}):\n"
        f"    record.delay(i, 'x' * {PADDING})\n"
        f"    time.sleep({PACE})\n"
    )
    try:
        wait_for(
            lambda: "ready." in (tmp_path / "worker.log").read_text(),
            timeout=120,
            what="the worker consuming",
        )
        producers = [
            subprocess.Popen([sys.executable, "-c", publish, str(n * EACH)], cwd=ROOT, env=env)
            for n in range(PRODUCERS)
        ]
        assert [p.wait(timeout=300) for p in producers] == [0] * PRODUCERS
        total = PRODUCERS * EACH
        wait_for(
            lambda: worker.poll() is not None or len(_consumed(records)) >= total,
            timeout=300,
            what=f"{total} messages consumed",
        )
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        worker.terminate()
        worker.wait(timeout=60)

    assert not (records / "twice").exists(), (records / "twice").read_text()
    assert sorted(_consumed(records)) == list(range(total))
    assert not list((tmp_path / "broker" / "bad").glob("*"))


def _consumed(records: Path) -> list[int]:
    return [int(p.name) for p in records.iterdir() if p.name.isdigit()]
