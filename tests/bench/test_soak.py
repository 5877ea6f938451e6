"""The soak with chaos (`bench/local/soak.py`), three minutes of it: `simrun serve` under a
steady stream of small runs while services and pods are killed at random."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def test_three_minutes_of_chaos_lose_nothing_and_need_no_hand(tmp_path: Path) -> None:
    """Every run submitted succeeds (none failed or stuck), no unit is lost or done twice,
    serve never gives up (no manual restart), and the chaos did kill something."""
    report_file = tmp_path / "soak.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "local" / "soak.py"),
            "--minutes",
            "3",
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
    assert report["manual_restarts"] == 0, report
    assert sum(report["kills"].values()) >= 5, report
    assert set(report["memory"]) == {"web", "worker", "watcher"}, report
    assert done.returncode == 0, done.stdout[-3000:]
