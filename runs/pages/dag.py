"""A run's DAG as inline SVG: tasks in layers by their dependencies, coloured by state.

A task's layer is one more than the deepest task it reads from, so edges always run left to
right; inside a layer tasks keep their topological position. Each node is a link to the task
(works without JavaScript), writes its state and progress in text, and has a progress bar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from runs.states import TaskState

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 176, 58, 64, 22, 12
INK = "#1b1f24"
EDGE = "#6b7480"
# (fill, border) per state: light fills keep dark text above 7:1; borders tell states apart.
STATE_COLOURS: dict[str, tuple[str, str]] = {
    TaskState.WAITING: ("#f3f5f7", "#8a939e"),
    TaskState.QUEUED: ("#e4e7eb", "#5f6873"),
    TaskState.RUNNING: ("#d3e5fb", "#1f5fa8"),
    TaskState.PREEMPTED: ("#ffe3bf", "#a35a00"),
    TaskState.RETRYING: ("#ffe3bf", "#a35a00"),
    TaskState.DONE: ("#d4eed8", "#2e7d32"),
    TaskState.FAILED: ("#fbd5d2", "#b3261e"),
    TaskState.SKIPPED: ("#eceef1", "#8a939e"),
    TaskState.CANCELLED: ("#eceef1", "#5f6873"),
}
PROGRESS_FILL = "#1f5fa8"


@dataclass(frozen=True)
class DagNode:
    """One task as the DAG shows it."""

    task_id: str
    state: str
    fraction: float
    dependencies: tuple[str, ...]
    href: str
    selected: bool = False


def layers(nodes: Sequence[DagNode]) -> dict[str, int]:
    """Each task's layer: 0 without dependencies, else one past its deepest dependency.

    `nodes` are in topological order (Task.position), so every dependency is placed first.
    """
    layer: dict[str, int] = {}
    for node in nodes:
        deps = [layer[d] for d in node.dependencies if d in layer]
        layer[node.task_id] = 1 + max(deps) if deps else 0
    return layer


def positions(nodes: Sequence[DagNode]) -> dict[str, tuple[float, float]]:
    """The top-left corner of every node."""
    layer = layers(nodes)
    rows: dict[int, int] = {}
    placed: dict[str, tuple[float, float]] = {}
    for node in nodes:
        column = layer[node.task_id]
        row = rows.get(column, 0)
        rows[column] = row + 1
        placed[node.task_id] = (PAD + column * (NODE_W + GAP_X), PAD + row * (NODE_H + GAP_Y))
    return placed


def _label(task_id: str, limit: int = 22) -> str:
    return task_id if len(task_id) <= limit else task_id[: limit - 1] + "…"


def draw(nodes: Sequence[DagNode], *, title: str) -> SafeString:
    """The DAG of a run; nodes link to their task."""
    at = positions(nodes)
    width = int(max((x for x, _ in at.values()), default=0) + NODE_W + 2 * PAD)
    height = int(max((y for _, y in at.values()), default=0) + NODE_H + 2 * PAD)
    body: list[str] = [
        '<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        f'markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" fill="{EDGE}"/></marker></defs>'
    ]
    for node in nodes:
        x1, y1 = at[node.task_id]
        for dep in node.dependencies:
            if dep not in at:
                continue
            x0, y0 = at[dep]
            sx, sy, ex, ey = x0 + NODE_W, y0 + NODE_H / 2, x1, y1 + NODE_H / 2
            mid = (sx + ex) / 2
            body.append(
                f'<path d="M{sx},{sy} C{mid},{sy} {mid},{ey} {ex - 2},{ey}" fill="none" '
                f'stroke="{EDGE}" stroke-width="1.5" marker-end="url(#dag-arrow)"/>'
            )
    described = []
    for node in nodes:
        x, y = at[node.task_id]
        fill, border = STATE_COLOURS.get(node.state, STATE_COLOURS[TaskState.WAITING])
        percent = round(100 * node.fraction)
        text = f"{node.task_id}: {node.state}, {percent}%"
        described.append(text)
        width_px = 3 if node.selected else 1.5
        body.append(
            f'<a href="{escape(node.href)}" class="dag-node" data-task="{escape(node.task_id)}" '
            f'data-state="{escape(node.state)}" aria-label="{escape(text)}">'
            f"<title>{escape(text)}</title>"
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{fill}" '
            f'stroke="{border}" stroke-width="{width_px}"/>'
            f'<text x="{x + 10}" y="{y + 20}" fill="{INK}" font-weight="600">'
            f"{escape(_label(node.task_id))}</text>"
            f'<text x="{x + 10}" y="{y + 37}" fill="{INK}">{escape(node.state)} · {percent}%</text>'
            f'<rect x="{x + 10}" y="{y + NODE_H - 13}" width="{NODE_W - 20}" height="6" rx="3" '
            f'fill="#ffffff" stroke="{border}" stroke-width="0.5"/>'
            f'<rect x="{x + 10}" y="{y + NODE_H - 13}" width="{(NODE_W - 20) * node.fraction:.1f}" '
            f'height="6" rx="3" fill="{PROGRESS_FILL}"/>'
            "</a>"
        )
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="group" '
        'aria-labelledby="dag-title" aria-describedby="dag-desc" '
        'font-family="system-ui, sans-serif" font-size="13" class="dag">'
        f'<title id="dag-title">{escape(title)}</title>'
        f'<desc id="dag-desc">{escape("; ".join(described))}</desc>'
    )
    return mark_safe(head + "".join(body) + "</svg>")
