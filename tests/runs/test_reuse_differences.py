"""Which part of a task's key first differs from an earlier task's (`first_difference`): the
reason a miss gives, in the order a user would look. Plain values."""

from __future__ import annotations

from typing import Any

import pytest

from runs.reuse import KeyDifference, KeyedTask, first_difference, task_key_parts

BASE: dict[str, Any] = {
    "format": 1,
    "environment": "env-a",
    "sources": ["model-1", "data-1"],
    "type": "ode_scan",
    "version": "0.1",
    "settings": {"t_end": 50, "points": 10},
    "inputs": {"scan": ["k1", ""]},
    "unique": "",
}


def changed(**parts: Any) -> dict[str, Any]:
    return {**BASE, **parts}


@pytest.mark.parametrize(
    ("mine", "difference"),
    [
        (changed(environment="env-b"), KeyDifference("environment", "", "env-b", "env-a")),
        (changed(type="sleep"), KeyDifference("type", "", "sleep", "ode_scan")),
        (changed(version="0.2"), KeyDifference("plugin", "", "0.2", "0.1")),
        (
            changed(settings={"t_end": 60, "points": 10}),
            KeyDifference("setting", "t_end", "60", "50"),
        ),
        (changed(settings={"t_end": 50}), KeyDifference("setting", "points", "null", "10")),
        (changed(sources=["model-1", "data-2"]), KeyDifference("source", "1", "data-2", "data-1")),
        (changed(sources=["model-1"]), KeyDifference("source", "1", "", "data-1")),
        (changed(inputs={"scan": ["k2", ""]}), KeyDifference("upstream", "scan", "scan")),
        (changed(unique="r2"), KeyDifference("unique")),
        # the earlier key has fewer sources, or lacks a port this one reads
        (
            changed(sources=["model-1", "data-1", "extra"]),
            KeyDifference("source", "2", "extra", ""),
        ),
        (
            changed(inputs={"scan": ["k1", ""], "more": ["k3", ""]}),
            KeyDifference("upstream", "more", "more"),
        ),
    ],
)
def test_the_first_part_that_differs_is_named_with_both_values(
    mine: dict[str, Any], difference: KeyDifference
) -> None:
    assert first_difference(mine, BASE) == difference


def test_the_environment_is_named_before_the_rest_and_the_settings_by_name() -> None:
    everything = changed(environment="env-b", type="sleep", settings={"a": 1, "t_end": 9})
    assert first_difference(everything, BASE) == KeyDifference("environment", "", "env-b", "env-a")
    settings = changed(settings={"points": 11, "t_end": 60})
    assert first_difference(settings, BASE) == KeyDifference("setting", "points", "11", "10")
    assert first_difference(changed(type="sleep", version="9"), BASE) == KeyDifference(
        "type", "", "sleep", "ode_scan"
    )


def test_an_upstream_port_is_named_with_the_task_it_reads() -> None:
    mine = changed(inputs={"scan": ["k2", ""]})
    assert first_difference(mine, BASE, names={"scan": "sweep"}) == KeyDifference(
        "upstream", "scan", "sweep"
    )


def test_equal_parts_differ_nowhere_and_long_values_are_cut() -> None:
    assert first_difference(dict(BASE), dict(BASE)) is None
    long = changed(environment="e" * 64)
    found = first_difference(long, BASE)
    assert found is not None and found.mine == "e" * 37 + "..." and len(found.mine) == 40
    forty = first_difference(changed(environment="e" * 40), BASE)
    assert forty is not None and forty.mine == "e" * 40
    one_more = first_difference(changed(environment="e" * 41), BASE)
    assert one_more is not None and one_more.mine == "e" * 37 + "..."


def test_an_earlier_key_unique_alone_differs() -> None:
    """A key made to match nothing (a `command` task's) differs whichever side it is on."""
    assert first_difference(BASE, changed(unique="r1")) == KeyDifference("unique")


def test_keys_without_settings_sources_or_inputs_compare_as_empty() -> None:
    """A key's parts read with their absent parts as empty (neither side fails)."""
    assert first_difference({}, {}) is None
    assert first_difference({"settings": {}, "sources": [], "inputs": {}}, {}) is None
    assert first_difference({}, {"settings": {}, "sources": [], "inputs": {}}) is None


def test_the_parts_of_a_key_are_what_it_digests() -> None:
    task = KeyedTask("t", "sleep", "0.1", {"units": 2}, {}, unique="")
    [parts] = task_key_parts(environment="env", sources=["s"], tasks=[task]).values()
    assert parts == {
        "format": 1,
        "environment": "env",
        "sources": ["s"],
        "type": "sleep",
        "version": "0.1",
        "settings": {"units": 2},
        "inputs": {},
        "unique": "",
    }
