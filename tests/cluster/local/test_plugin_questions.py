"""B14: the port's one-shot plugin host on this machine (`LocalBackend.ask_plugin_host`): the
harness's host run once in an environment's Python, its questions' paths under the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import simrun_examples
from cluster.local.backend import LocalBackend
from runs.ports import PluginHostFailed
from simrun_harness.plugin_code import code_digest


def test_a_host_run_once_identifies_a_type_and_lists_its_units_into_the_store(
    store: Path,
) -> None:
    backend = LocalBackend(store)
    units = {
        "op": "units",
        "type": "sleep",
        "settings": {"units": 3, "seconds": 0},
        "task_id": "t",
        "model_dir": None,
        "out": "runs/r1/tasks/t/units.jsonl",
        "limit": 10,
    }
    (store / "runs/r1/tasks/t").mkdir(parents=True)

    identity, listed = backend.ask_plugin_host(
        "service", [{"op": "identify", "type": "sleep"}, units], timeout_s=60, memory_mb=1024
    )

    assert identity["ok"] and identity["package"] == "simrun-examples"
    assert identity["digest"] == code_digest(Path(simrun_examples.__file__).parent)
    assert listed == {"ok": True, "count": 3}
    lines = (store / "runs/r1/tasks/t/units.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [0, 1, 2]


def test_an_environment_not_built_here_gives_no_answers_and_says_so(store: Path) -> None:
    backend = LocalBackend(store)

    with pytest.raises(PluginHostFailed, match=r"the environment (ab)+ is not built here"):
        backend.ask_plugin_host(
            "ab" * 32, [{"op": "identify", "type": "sleep"}], timeout_s=5, memory_mb=256
        )
