"""The soak with chaos (`bench/local/soak.py`), three minutes of it: `simrun serve` under a
steady stream of small runs while every kind of its processes is killed in turn and its disk
is filled once (the fill needs to mount a tmpfs: root or CAP_SYS_ADMIN; without, the report
says it was skipped and the rest is checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.local._chaos import KINDS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def test_three_minutes_of_chaos_lose_nothing_need_no_hand_and_leave_nothing(
    tmp_path: Path,
) -> None:
    """Every run submitted succeeds (none failed or stuck), no unit is lost or done twice,
    serve never gives up (no manual action), every kind of process was met by the chaos,
    the disk was filled and freed, and `simrun stop` left no process of the installation."""
    report_file = tmp_path / "soak.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "local" / "soak.py"),
            "--minutes",
            "3",
            "--disk-full-s",
            "20",
            "--json",
            str(report_file),
            "--seed",
            "15",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert report_file.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(report_file.read_text())

    assert report["runs"]["submitted"] >= 10, report
    assert report["runs"]["failed"] == 0, report
    assert report["runs"]["stuck"] == 0, report
    assert report["runs"]["succeeded"] == report["runs"]["submitted"], report
    assert report["units"]["lost"] == 0, report
    assert report["units"]["done_twice"] == 0, report
    assert report["units"]["total"] == report["runs"]["submitted"] * 6, report
    assert report["manual_actions"] == 0, report
    assert report["orphans_after_stop"] == [], report
    assert set(report["kills"]) == set(KINDS), report
    assert report["kills"]["serve"]["killed"] >= 1, report
    assert report["serve_restarted_after_its_kill"] >= 1, report
    if "skipped" not in report["disk"]:
        assert report["disk"]["full_s"] > 0, report
    assert set(report["memory"]) == {"web", "worker", "beat", "watcher"}, report
    assert done.returncode == 0, done.stdout[-3000:]
