"""The SVG plots and the DAG layout, from plain values (no database)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from runs.pages import plots, run_plots
from runs.pages.dag import DagNode, draw, layers, positions
from runs.selectors.workers import WorkerView

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


def test_the_projected_end_is_drawn_from_the_last_unit_done_to_the_total() -> None:
    """The projection: a dashed line from (last unit done, done) to (projected end, total)."""
    projection = plots.Projection(end_s=90.0, basis="unit time learned from earlier runs")
    svg = plots.units_over_time(
        [(0.0, 1.0), (30.0, 2.0)], total=6, label="s", projection=projection
    )
    root = parse(svg)
    desc = root.find(f"{SVG}desc").text  # type: ignore[union-attr]
    assert desc == (
        "2 of 6 units done over 30s. Projected end at 90s (unit time learned from earlier runs)."
    )
    line = root.find(f"{SVG}line[@class='projection']")
    end = root.find(f"{SVG}line[@class='projected-end']")
    assert line is not None and end is not None
    # the x axis reaches 100 s over 492 px from x=52, the y axis 6 units over 168 px from y=14
    x = lambda s: 52 + 492 * s / 100  # noqa: E731
    y = lambda u: 14 + 168 * (1 - u / 6)  # noqa: E731
    assert [float(line.get(a)) for a in ("x1", "y1", "x2", "y2")] == pytest.approx(  # type: ignore[arg-type]
        [x(30), y(2), x(90), y(6)], abs=0.06
    )
    assert float(end.get("x1")) == pytest.approx(x(90), abs=0.06)  # type: ignore[arg-type]
    assert "projected end 90s" in svg


def test_without_a_projection_no_projected_end_is_drawn() -> None:
    svg = plots.units_over_time([(0.0, 1.0)], total=6, label="s")
    assert "projection" not in svg and "Projected" not in svg


def test_memory_per_task_draws_each_peak_and_its_limit() -> None:
    bars = [plots.MemoryBar("scan", 0.75, 1.5), plots.MemoryBar("summary", None, 2.0)]
    root = parse(plots.memory_per_task(bars))
    assert root.find(f"{SVG}title").text == "Peak memory per task against its limit"  # type: ignore[union-attr]
    assert root.find(f"{SVG}desc").text == "scan: 0.75 / 1.50 GiB; summary: ? / 2.00 GiB"  # type: ignore[union-attr]
    peaks = root.findall(f"{SVG}rect[@class='peak']")
    limits = root.findall(f"{SVG}line[@class='limit']")
    assert len(peaks) == 1 and len(limits) == 2
    # the scale reaches 2 GiB over 360 px from x=110: the peak ends at 0.75, the limits at 1.5, 2
    assert float(peaks[0].get("width")) == pytest.approx(360 * 0.75 / 2, abs=0.06)  # type: ignore[arg-type]
    assert [float(line.get("x1")) for line in limits] == pytest.approx(  # type: ignore[arg-type]
        [110 + 360 * 1.5 / 2, 110 + 360 * 2.0 / 2], abs=0.06
    )


def test_the_projected_end_counts_rounds_of_the_units_left_over_the_processes() -> None:
    points = [(0.0, 1.0), (10.0, 2.0)]
    # 4 units left over 3 processes: 2 rounds of 5 s after the last unit done
    assert run_plots.projected_end(points, total=6, unit_s=5.0, processes=3) == 20.0
    assert run_plots.projected_end([], total=4, unit_s=2.0, processes=4) == 2.0
    assert run_plots.projected_end(points, total=2, unit_s=5.0, processes=3) is None  # all done
    assert run_plots.projected_end(points, total=6, unit_s=None, processes=3) is None
    assert run_plots.projected_end(points, total=None, unit_s=5.0, processes=3) is None


def view(worker: str, peak: float | None, limit: float | None, oom: bool = False) -> WorkerView:
    return WorkerView(worker, "base", "done", None, 1, 1, 0, 0, peak, limit, oom, 0, None)


def test_a_tasks_memory_is_its_highest_peak_against_that_workers_limit() -> None:
    workers = [view("s-w0", 0.5, 1.0), view("s-w1", 0.9, 1.25, oom=True), view("s-w2", None, None)]
    assert run_plots.task_memory("s", workers, 2.0) == plots.MemoryBar("s", 0.9, 1.25, True)
    # before any report: no peak, the plan's pod memory as the limit
    assert run_plots.task_memory("s", [view("s-w0", None, None)], 2.0) == plots.MemoryBar(
        "s", None, 2.0, False
    )


def test_a_split_tasks_units_bar_is_their_highest_peak_against_the_memory_per_process() -> None:
    bar = run_plots.unit_memory("scan", 0.5, 0.75)
    assert bar == plots.MemoryBar("scan · per unit", 0.5, 0.75)
    assert run_plots.unit_memory("scan", None, None) == plots.MemoryBar(
        "scan · per unit", None, None
    )


def test_cumulative_of_times_in_order_picks_its_points_as_downsample_does() -> None:
    """The run page's units over time from the times in order: the same points `cumulative`
    and `downsample` give, without a list as long as the units."""
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    times = [t0 + timedelta(seconds=i * 0.5) for i in range(2_000)]
    stamps = [t.timestamp() for t in times]

    assert plots.cumulative_sorted(stamps, limit=50) == plots.downsample(
        plots.cumulative(times), limit=50
    )
    assert plots.cumulative_sorted(stamps[:7]) == plots.cumulative(times[:7])
    assert plots.cumulative_sorted([]) == []
