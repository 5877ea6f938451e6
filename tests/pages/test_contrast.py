"""Colours meet contrast: text on state badges, DAG nodes and buttons is at least 4.5:1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runs.pages import plots
from runs.pages.dag import INK, STATE_COLOURS

CSS = (Path(__file__).resolve().parents[2] / "runs/static/runs/simrun.css").read_text()


def luminance(colour: str) -> float:
    channels = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def badge_fills() -> dict[str, str]:
    found = {}
    for selectors, fill in re.findall(
        r"((?:\.state-[a-z]+,?\s*)+)\{\s*background:\s*(#[0-9a-f]{6})", CSS
    ):
        for state in re.findall(r"\.state-([a-z]+)", selectors):
            found[state] = fill
    return found


def test_every_run_and_task_state_has_a_badge() -> None:
    states = {"submitting", "queued", "running", "succeeded", "failed", "cancelled"}
    states |= set(STATE_COLOURS)
    assert states <= set(badge_fills())


@pytest.mark.parametrize(("state", "fill"), sorted(badge_fills().items()))
def test_badge_text_is_legible(state: str, fill: str) -> None:
    assert contrast("#1b1f24", fill) >= 4.5, state


@pytest.mark.parametrize(("state", "colours"), sorted(STATE_COLOURS.items()))
def test_dag_node_text_is_legible(state: str, colours: tuple[str, str]) -> None:
    assert contrast(INK, colours[0]) >= 4.5, state


@pytest.mark.parametrize(
    ("text", "background"),
    [
        ("#ffffff", "#1f5fa8"),  # buttons
        ("#ffffff", "#b3261e"),  # danger buttons
        ("#ffffff", "#24292f"),  # the header
        ("#4a5360", "#ffffff"),  # help text
        ("#1f5fa8", "#ffffff"),  # links
        (plots.INK, plots.RUN_FILLS[0]),
    ],
)
def test_text_colours_of_the_pages_are_legible(text: str, background: str) -> None:
    assert contrast(text, background) >= 4.5
