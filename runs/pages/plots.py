"""Plots drawn on the server as inline SVG: no JavaScript, no build step, readable without CSS.

Each function takes plain values and returns SVG markup (marked safe: every text in it is
escaped here). Every plot has a <title> and <desc> so a screen reader gets what it shows, and
colours carry no meaning alone: values are written as text too.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.template.defaultfilters import floatformat
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

INK = "#1b1f24"
MUTED = "#4a5360"
GRID = "#d5dae1"
LINE = "#1f5fa8"
LIMIT = "#b3261e"
BAR = "#5b8fd0"
BAR_OOM = "#c0392b"
FONT = 'font-family="system-ui, sans-serif" font-size="12"'
# Fills for pods of different runs on a server: mid tones, each with dark text legible on it.
RUN_FILLS = ("#8ecae6", "#ffb703", "#90be6d", "#f4a261", "#c3aed6", "#a8dadc", "#f6bd60")
MAX_POINTS = 600


def _svg(width: int, height: int, title: str, desc: str, body: list[str]) -> SafeString:
    ident = "p" + hashlib.sha1(f"{title}{desc}".encode()).hexdigest()[:10]
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="100%" style="max-width:{width}px" role="img" '
        f'aria-labelledby="{ident}-t {ident}-d" {FONT}>'
        f'<title id="{ident}-t">{escape(title)}</title><desc id="{ident}-d">{escape(desc)}</desc>'
    )
    return mark_safe(head + "".join(body) + "</svg>")


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `top` (1, 2, 2.5 or 5 times a power of ten)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-9:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _fmt(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e6 else f"{value:.3g}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g}s"
    if seconds < 7200:
        return f"{seconds / 60:g}m"
    return f"{seconds / 3600:.3g}h"


def downsample(points: Sequence[tuple[float, float]], limit: int = MAX_POINTS) -> list:
    """At most `limit` points, keeping the first and the last (a step line stays honest)."""
    if len(points) <= limit:
        return list(points)
    step = len(points) / (limit - 1)
    picked = [points[int(i * step)] for i in range(limit - 1)]
    return [*picked, points[-1]]


def cumulative(times: Sequence[datetime]) -> list[tuple[float, float]]:
    """(seconds since the first, how many so far) for each time, in time order."""
    ordered = sorted(times)
    if not ordered:
        return []
    start = ordered[0]
    return [((t - start).total_seconds(), float(i + 1)) for i, t in enumerate(ordered)]


def cumulative_sorted(
    stamps: Sequence[float], limit: int = MAX_POINTS
) -> list[tuple[float, float]]:
    """`cumulative` of times already in order (POSIX seconds), at most `limit` points picked
    as `downsample` picks them: the first and the last kept, no list as long as the times."""
    count = len(stamps)
    if not count:
        return []
    start = stamps[0]
    if count <= limit:
        picked: Sequence[int] = range(count)
    else:
        step = count / (limit - 1)
        picked = [*(int(i * step) for i in range(limit - 1)), count - 1]
    return [(stamps[i] - start, float(i + 1)) for i in picked]


@dataclass(frozen=True)
class Projection:
    """When the last unit is expected done (seconds on the plot's time axis), and from what."""

    end_s: float
    basis: str


def units_over_time(
    points: Sequence[tuple[float, float]],
    *,
    total: int | None,
    label: str,
    projection: Projection | None = None,
    reused: int = 0,
) -> SafeString:
    """Units done over time: a step line from the first unit done (from `reused`, the units
    linked from earlier runs, done before any was computed), the total as a dashed line, and
    the projected end as a dashed line from the last unit done to the total."""
    width, height, left, right, top, bottom = 560, 220, 52, 16, 14, 38
    points = [(t, n + reused) for t, n in points] or ([(0.0, float(reused))] if reused else [])
    done = int(points[-1][1]) if points else 0
    span = points[-1][0] if points else 0.0
    desc = f"{done} of {total if total is not None else '?'} units done"
    if reused:
        desc += f" ({reused} reused from earlier runs)"
    desc += f" over {_duration(round(span, 1))}." if points else "; none done yet."
    if projection is not None:
        desc += f" Projected end at {_duration(round(projection.end_s, 1))} ({projection.basis})."
    y_top = max(float(total or 0), float(done), 1.0)
    x_top = max(span, projection.end_s if projection else 0.0, 1.0)
    y_ticks, x_ticks = nice_ticks(y_top, 4), nice_ticks(x_top, 5)
    y_max, x_max = y_ticks[-1], x_ticks[-1]
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(v: float) -> float:
        return left + plot_w * v / x_max

    def y(v: float) -> float:
        return top + plot_h * (1 - v / y_max)

    body = _axes(x_ticks, y_ticks, x, y, left, width - right, top, height - bottom)
    body.append(
        f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" fill="{MUTED}">'
        "time since the first unit done</text>"
    )
    if total:
        body.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(total):.1f}" y2="{y(total):.1f}" '
            f'stroke="{MUTED}" stroke-dasharray="5 4"/>'
            f'<text x="{width - right - 4}" y="{y(total) - 4:.1f}" text-anchor="end" '
            f'fill="{INK}">{total} units</text>'
        )
    if points:
        body += _done_line(points, reused, x, y)
    if projection is not None and total:
        x0, y0 = (x(span), y(done)) if points else (x(0), y(0))
        end = x(projection.end_s)
        body.append(
            f'<line class="projection" x1="{x0:.1f}" y1="{y0:.1f}" x2="{end:.1f}" '
            f'y2="{y(total):.1f}" stroke="{LINE}" stroke-width="2" stroke-dasharray="3 3"/>'
            f'<line class="projected-end" x1="{end:.1f}" x2="{end:.1f}" y1="{top}" '
            f'y2="{height - bottom}" stroke="{MUTED}" stroke-dasharray="2 3"/>'
            f'<text x="{end - 4:.1f}" y="{top + 24}" text-anchor="end" fill="{INK}">'
            f"projected end {_duration(round(projection.end_s, 1))}</text>"
        )
    return _svg(width, height, f"Units done over time: {label}", desc, body)


def _done_line(points: Sequence[tuple[float, float]], reused: int, x: Any, y: Any) -> list[str]:
    """The step line of units done, from the units reused (labelled) at the start."""
    path = [f"M{x(0):.1f},{y(0):.1f}"]
    parts = []
    if reused:
        path.append(f"V{y(reused):.1f}")
        parts.append(
            f'<text x="{x(0) + 4:.1f}" y="{y(reused) + 14:.1f}" fill="{INK}">{reused} reused</text>'
        )
    for px, py in downsample(points):
        path.append(f"H{x(px):.1f}V{y(py):.1f}")
    parts.append(f'<path d="{"".join(path)}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    return parts


def _axes(
    x_ticks: list[float],
    y_ticks: list[float],
    x: object,
    y: object,
    x0: float,
    x1: float,
    y0: float,
    y1: float,
) -> list[str]:
    assert callable(x) and callable(y)
    parts = []
    for v in y_ticks:
        parts.append(
            f'<line x1="{x0}" x2="{x1}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{GRID}"/>'
            f'<text x="{x0 - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="{INK}">{_fmt(v)}</text>'
        )
    for v in x_ticks:
        parts.append(
            f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{y1}" y2="{y1 + 4}" stroke="{MUTED}"/>'
            f'<text x="{x(v):.1f}" y="{y1 + 17}" text-anchor="middle" fill="{INK}">'
            f"{_duration(v)}</text>"
        )
    parts.append(f'<line x1="{x0}" x2="{x1}" y1="{y1}" y2="{y1}" stroke="{MUTED}"/>')
    parts.append(f'<line x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}" stroke="{MUTED}"/>')
    return parts


@dataclass(frozen=True)
class MemoryBar:
    """One worker's peak memory against its limit (GiB); None when not reported yet."""

    worker: str
    peak_gb: float | None
    limit_gb: float | None
    oom_killed: bool = False


def memory_per_worker(bars: Sequence[MemoryBar], *, label: str) -> SafeString:
    """A horizontal bar per worker: its peak memory, the limit as a red mark, values in text."""
    return _memory_bars(bars, title=f"Peak memory per worker against its limit: {label}")


def memory_per_task(bars: Sequence[MemoryBar]) -> SafeString:
    """A bar per task (and its units'), each a peak against its limit, values in text."""
    return _memory_bars(bars, title="Peak memory per task against its limit", what="task")


def _memory_bars(bars: Sequence[MemoryBar], *, title: str, what: str = "worker") -> SafeString:
    row, left, right, top = 30, 110, 150, 10
    width = 620
    height = top * 2 + row * max(1, len(bars)) + 20
    scale_top = max(
        [b.limit_gb or 0 for b in bars] + [b.peak_gb or 0 for b in bars] + [0.5],
    )
    ticks = nice_ticks(scale_top, 4)
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + plot_w * v / ticks[-1]

    body = []
    bottom = top + row * max(1, len(bars))
    for v in ticks:
        body.append(
            f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top}" y2="{bottom}" stroke="{GRID}"/>'
            f'<text x="{x(v):.1f}" y="{bottom + 15}" text-anchor="middle" fill="{INK}">'
            f"{_fmt(v)} GiB</text>"
        )
    summary = []
    for i, bar in enumerate(bars):
        y = top + i * row
        body.append(
            f'<text x="{left - 6}" y="{y + 19}" text-anchor="end" fill="{INK}">'
            f"{escape(bar.worker)}</text>"
        )
        if bar.peak_gb is not None:
            fill = BAR_OOM if bar.oom_killed else BAR
            body.append(
                f'<rect x="{left}" y="{y + 6}" width="{max(1.0, x(bar.peak_gb) - left):.1f}" '
                f'height="18" fill="{fill}" class="peak"/>'
            )
        if bar.limit_gb is not None:
            body.append(
                f'<line class="limit" x1="{x(bar.limit_gb):.1f}" x2="{x(bar.limit_gb):.1f}" '
                f'y1="{y + 2}" y2="{y + row - 2}" stroke="{LIMIT}" stroke-width="3"/>'
            )
        text = _memory_text(bar)
        summary.append(f"{bar.worker}: {text}")
        body.append(
            f'<text x="{width - right + 8}" y="{y + 19}" fill="{INK}">{escape(text)}</text>'
        )
    if not bars:
        body.append(f'<text x="{left}" y="{top + 19}" fill="{MUTED}">no {what} has reported</text>')
    return _svg(width, height, title, "; ".join(summary) or f"No {what} has reported yet.", body)


def _memory_text(bar: MemoryBar) -> str:
    # as the tables round them (the template's floatformat: half up), never one digit apart
    peak = "?" if bar.peak_gb is None else floatformat(bar.peak_gb, 2)
    limit = "?" if bar.limit_gb is None else floatformat(bar.limit_gb, 2)
    return f"{peak} / {limit} GiB" + (" killed" if bar.oom_killed else "")


@dataclass(frozen=True)
class PodBar:
    """A pod on a server: what it requests, and the run it belongs to (None: no run's)."""

    pod: str
    run_id: str | None
    cores: float
    memory_gb: float


def run_fill(run_id: str | None) -> str:
    """A stable fill for a run's pods, so one run has one colour across servers."""
    if run_id is None:
        return "#cfd4da"
    return RUN_FILLS[int(hashlib.sha1(run_id.encode()).hexdigest(), 16) % len(RUN_FILLS)]


def server_bars(*, name: str, cores: float, memory_gb: float, pods: Sequence[PodBar]) -> SafeString:
    """Two bars of a server, cores and memory, filled by its pods' requests, one segment each."""
    width, left, right, bar_h = 620, 80, 150, 26
    height = 2 * bar_h + 30
    plot_w = width - left - right
    body = []
    used_cores = sum(p.cores for p in pods)
    used_memory = sum(p.memory_gb for p in pods)
    for row, (what, capacity, used, unit) in enumerate(
        (("cores", cores, used_cores, ""), ("memory", memory_gb, used_memory, " GiB"))
    ):
        y = 6 + row * (bar_h + 14)
        body.append(
            f'<text x="{left - 6}" y="{y + 18}" text-anchor="end" fill="{INK}">{what}</text>'
            f'<rect x="{left}" y="{y}" width="{plot_w}" height="{bar_h}" fill="#f3f5f7" '
            f'stroke="{MUTED}"/>'
        )
        offset = 0.0
        top = max(capacity, used, 1e-9)
        for pod in pods:
            amount = pod.cores if what == "cores" else pod.memory_gb
            w = plot_w * amount / top
            body.append(
                f'<rect x="{left + offset:.1f}" y="{y}" width="{max(w, 0.5):.1f}" '
                f'height="{bar_h}" fill="{run_fill(pod.run_id)}" stroke="#ffffff">'
                f"<title>{escape(pod.pod)} ({escape(pod.run_id or 'no run')}): "
                f"{_fmt(amount)}{unit}</title></rect>"
            )
            offset += w
        body.append(
            f'<text x="{width - right + 8}" y="{y + 18}" fill="{INK}">'
            f"{_fmt(round(used, 2))} of {_fmt(round(capacity, 2))}{unit}</text>"
        )
    desc = (
        f"{len(pods)} pods request {_fmt(round(used_cores, 2))} of {_fmt(cores)} cores and "
        f"{_fmt(round(used_memory, 2))} of {_fmt(memory_gb)} GiB."
    )
    return _svg(width, height, f"Server {name}", desc, body)
