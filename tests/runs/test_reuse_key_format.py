"""A task's key is a stored format: the keys recorded by runs made before an upgrade must be
the keys the upgraded service computes for the same work, or nothing done before is reused.
So the key is pinned here as docs/reuse.md defines it: SHA-256 of the canonical JSON (sorted
keys, no spaces) of the key format, environment, sources, type, version, settings, inputs
(each `[key of the task read, part]`) and the `unique` of a `command` task."""

from __future__ import annotations

import hashlib
import json

from runs.reuse import KeyedTask, task_keys


def sha256_of(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_task_key_is_the_digest_of_what_decides_its_output_under_fixed_names() -> None:
    scan = KeyedTask("scan", "ode_scan", "0.1", {"t_end": 50}, {})
    summary = KeyedTask("summary", "summary", "0.2", {"threshold": 1}, {"scan": "scan.table"})
    command = KeyedTask("cmd", "command", "built-in", {"args": ["true"]}, {}, unique="r1")

    keys = task_keys(
        environment="env-a", sources=["snap-a", "snap-b"], tasks=[scan, summary, command]
    )

    common = {"format": 1, "environment": "env-a", "sources": ["snap-a", "snap-b"]}
    scan_key = sha256_of(
        common
        | {
            "type": "ode_scan",
            "version": "0.1",
            "settings": {"t_end": 50},
            "inputs": {},
            "unique": "",
        }
    )
    assert keys["scan"] == scan_key
    assert keys["summary"] == sha256_of(
        common
        | {
            "type": "summary",
            "version": "0.2",
            "settings": {"threshold": 1},
            "inputs": {"scan": [scan_key, "table"]},
            "unique": "",
        }
    )
    assert keys["cmd"] == sha256_of(
        common
        | {
            "type": "command",
            "version": "built-in",
            "settings": {"args": ["true"]},
            "inputs": {},
            "unique": "r1",
        }
    )
