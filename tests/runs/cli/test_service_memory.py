"""What serve's Celery processes import as they start: Celery's Django fixup runs Django's
system checks there unless told not to, and the checks import every view, the API and what
they use (~35 MB in each of the worker and beat, which serve no page)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runs.cli.serving import services_env

STARTING = """
import json, sys
from simrun_site.celery import app
app.loader.import_default_modules()  # what `celery worker` and `celery beat` do as they start
views = ("simrun_site.urls", "runs.api.urls", "runs.pages.run_page", "rocrate")
print(json.dumps(sorted(m for m in views if m in sys.modules)))
"""


def test_serve_s_worker_and_beat_start_without_importing_the_views(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    env = services_env(tmp_path / "data") | {"DJANGO_SETTINGS_MODULE": "simrun_site.settings"}

    started = subprocess.run(
        [sys.executable, "-c", STARTING], env=env, capture_output=True, text=True, check=True
    )

    assert json.loads(started.stdout.strip().splitlines()[-1]) == []
