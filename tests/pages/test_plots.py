"""The SVG plots and the DAG layout, from plain values (no database)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from runs.pages import plots
from runs.pages.dag import DagNode, draw, layers, positions

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, or this raises


def node(
    task: str, deps: tuple[str, ...] = (), state: str = "waiting", fraction: float = 0.0
) -> DagNode:
    return DagNode(task, state, fraction, deps, f"?task={task}")


def test_a_task_is_one_layer_past_its_deepest_dependency() -> None:
    nodes = [node("a"), node("b", ("a",)), node("c"), node("d", ("b", "c"))]
    assert layers(nodes) == {"a": 0, "b": 1, "c": 0, "d": 2}


def test_tasks_of_one_layer_are_stacked_in_their_order() -> None:
    at = positions([node("a"), node("b"), node("c", ("a", "b"))])
    assert at["a"][0] == at["b"][0] < at["c"][0]
    assert at["a"][1] < at["b"][1]


def test_the_dag_links_each_task_and_writes_state_and_progress_in_text() -> None:
    svg = draw([node("scan", state="running", fraction=0.5), node("sum", ("scan",))], title="T")
    root = parse(svg)
    links = root.findall(f"{SVG}a")
    assert [a.get("href") for a in links] == ["?task=scan", "?task=sum"]
    assert links[0].get("aria-label") == "scan: running, 50%"
    assert len(root.findall(f"{SVG}path")) == 1  # one edge, scan → sum


def test_task_ids_and_titles_are_escaped() -> None:
    svg = draw([node("a")], title="<script>")
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_cumulative_counts_from_the_first_time() -> None:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    times = [t0 + timedelta(seconds=3), t0, t0 + timedelta(seconds=1)]
    assert plots.cumulative(times) == [(0.0, 1.0), (1.0, 2.0), (3.0, 3.0)]


def test_units_over_time_says_how_many_are_done_of_the_total() -> None:
    svg = plots.units_over_time([(0.0, 1.0), (30.0, 2.0)], total=6, label="scan")
    root = parse(svg)
    assert root.find(f"{SVG}desc").text == "2 of 6 units done over 30s."  # type: ignore[union-attr]
    assert "6 units" in svg


def test_units_over_time_without_any_unit_done_draws_empty_axes() -> None:
    root = parse(plots.units_over_time([], total=None, label="scan"))
    assert root.find(f"{SVG}desc").text == "0 of ? units done; none done yet."  # type: ignore[union-attr]


def test_downsampling_keeps_the_first_and_last_points() -> None:
    points = [(float(i), float(i)) for i in range(10_000)]
    kept = plots.downsample(points, 100)
    assert len(kept) == 100 and kept[0] == points[0] and kept[-1] == points[-1]


def test_memory_per_worker_marks_the_limit_and_writes_values() -> None:
    bars = [plots.MemoryBar("w0", 0.75, 1.5), plots.MemoryBar("w1", 1.5, 1.5, oom_killed=True)]
    svg = plots.memory_per_worker(bars, label="scan")
    root = parse(svg)
    assert root.find(f"{SVG}desc").text == "w0: 0.75 / 1.50 GiB; w1: 1.50 / 1.50 GiB killed"  # type: ignore[union-attr]
    assert svg.count(f'stroke="{plots.LIMIT}"') == 2


def test_server_bars_stack_the_pods_requests_against_capacity() -> None:
    pods = [plots.PodBar("a-w0", "r1", 2, 4), plots.PodBar("b-w0", None, 1, 1)]
    svg = plots.server_bars(name="n1", cores=8, memory_gb=16, pods=pods)
    root = parse(svg)
    assert root.find(f"{SVG}desc").text == "2 pods request 3 of 8 cores and 5 of 16 GiB."  # type: ignore[union-attr]
    assert "3 of 8" in svg and "5 of 16 GiB" in svg


def test_one_run_has_one_colour_on_every_server() -> None:
    assert plots.run_fill("r1") == plots.run_fill("r1")
    assert plots.run_fill(None) not in plots.RUN_FILLS


def test_ticks_are_round_and_reach_the_top() -> None:
    assert plots.nice_ticks(6, 4) == [0.0, 2.0, 4.0, 6.0]
    assert plots.nice_ticks(0.7, 4)[-1] >= 0.7
