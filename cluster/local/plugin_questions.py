"""A plugin host run once in a model's virtual environment (`Backend.ask_plugin_host`).

The service keeps warm hosts of the environments it can start a process in
(`runs.plugin_host`); this is the port's one-shot form, the same the Argo backend runs in a
pod of the model's image: `python -m simrun_harness.plugin_host --once` with the questions as
an argument, its answers read back from its output, its process group ended after.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cluster.local.launcher import base_env
from runs.ports import PluginHostFailed
from simrun_harness.plugin_host import parse_answers

LOG_TAIL_LINES = 20


def ask_once(
    bin_dir: Path,
    store: Path,
    questions: Sequence[Mapping[str, Any]],
    *,
    timeout_s: float,
    memory_mb: int,
) -> list[dict[str, Any]]:
    """The answers of a one-shot host of the environment `bin_dir`; PluginHostFailed."""
    python = bin_dir / "python"
    if not python.exists():
        raise PluginHostFailed(f"the environment {bin_dir.parent.name} is not built here")
    argv = [str(python), "-m", "simrun_harness.plugin_host", "--once", "--store", str(store)]
    argv += ["--memory-mb", str(memory_mb), "--questions", json.dumps(list(questions))]
    proc = subprocess.Popen(
        argv,
        env=base_env(bin_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise PluginHostFailed(
            f"it did not answer within {timeout_s:g} s and was stopped"
        ) from None
    log = out.decode("utf-8", errors="replace")
    answers = parse_answers(log)
    if len(answers) != len(questions):
        tail = "\n".join(log.strip().splitlines()[-LOG_TAIL_LINES:])
        ended = f"it ended (exit {proc.returncode})"
        raise PluginHostFailed(ended + (f":\n{tail}" if tail else ""))
    return answers
