"""Small launches of runs for the Argo backend's tests (`tests/builders.py`: tier "person",
shapes with a retry memory), and the files a service writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simrun_harness.layout import StorePaths
from tests.builders import ARGO

shape = ARGO.shape
plan = ARGO.plan
command_task = ARGO.command_task
split_task = ARGO.split_task
launch = ARGO.launch


def write_task(store: Path, run_id: str, task_id: str, type_name: str, **settings: Any) -> Path:
    """What the service writes before it submits: the task's `task.json`; its directory."""
    paths = StorePaths(store).run(run_id).task(task_id)
    paths.root.mkdir(parents=True, exist_ok=True)
    record = {"task": task_id, "type": type_name, "settings": settings, "inputs": {}}
    paths.task_file.write_text(json.dumps(record))
    return paths.root
