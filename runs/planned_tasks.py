"""A workflow's tasks as a submission plans them: resources resolved, units counted, pods
planned on the nodes as they are. A submission writes these as its `Task` rows; an estimate
(`runs.selectors.task_estimates`) shows them without submitting."""

from __future__ import annotations

from typing import Any, TypedDict

from runs import resources
from runs.models.observation import MERGE
from runs.observations import history
from runs.planner import plan_task
from runs.plans import Node, ResourcesJson, TaskPlanJson
from runs.store import store
from runs.task_types import origin, registry
from runs.workflow import SplitMode, Workflow, WorkflowError, WorkflowInvalid
from simrun_harness.plugin import SettingsError, TaskContext


class PlannedTask(TypedDict):
    """One task as planned: the fields of its `Task` row."""

    task_id: str
    position: int
    type: str
    splittable: bool
    settings: dict[str, Any]  # as the workflow gives them (the plugin's settings model validates)
    inputs: dict[str, str]  # port → `<task>` or `<task>.<port>`
    dependencies: list[str]
    resources: ResourcesJson
    plan: TaskPlanJson
    units_total: int | None


def plan_tasks(
    spec: Workflow,
    *,
    nodes: list[Node],
    model: str | None,
    split: SplitMode | None,
    tier: str,
    reserve: str | None,
) -> list[PlannedTask]:
    """Every task of `spec` in topological order, its resources resolved (hint, history,
    workflow) and its pods planned on `nodes`: the rows a submission writes, and what an
    estimate shows. WorkflowInvalid when a plugin's `units()` raises; PlanRefused."""
    types = registry()
    model_dir = store().snapshot(model) if model else None
    largest = max((n.memory_gb for n in nodes), default=None)
    rows = []
    for position, task in enumerate(spec.order()):
        cls = types[task.type]
        task_type = cls()
        settings = task_type.parse_settings(task.settings)
        units = None
        if cls.splittable:
            units = _count_units(task.id, task.type, task_type, settings, model_dir)
        resolved = resources.resolve(
            hint=cls.hint,
            history=history(task_type=task.type, model_digest=model or ""),
            overrides=task.resources,
            node_memory_gb=largest,
            merges=history(task_type=task.type, model_digest=model or "", role=MERGE)
            if cls.splittable
            else (),
        )
        plan = plan_task(
            units=units,
            resources=resolved,
            nodes=nodes,
            split=split or spec.split_of(task),
            tier=tier,
            reserve=reserve,
            coordinator_merges=task.coordinator_merges,
            splittable=cls.splittable,
        )
        rows.append(
            PlannedTask(
                task_id=task.id,
                position=position,
                type=task.type,
                splittable=cls.splittable,
                settings=task.settings,
                inputs=dict(task.inputs),
                dependencies=task.dependencies(),
                resources=resolved.to_json(),
                plan=plan.to_json(),
                units_total=units,
            )
        )
    return rows


def _count_units(
    task_id: str, type_name: str, task_type: Any, settings: Any, model_dir: Any
) -> int:
    """The number of units the plugin lists for a task; WorkflowInvalid naming the task and
    the plugin when its `units()` raises (a SettingsError, or any bug of the plugin)."""
    ctx = TaskContext(task_id=task_id, settings=settings, model_dir=model_dir)
    try:
        return len(task_type.units(ctx))
    except Exception as exc:  # plugin code may raise anything: a message, never a traceback
        kind = "" if isinstance(exc, SettingsError) else f"{type(exc).__name__}: "
        message = f"units(): {kind}{exc} (raised by {origin(type_name)})"
        raise WorkflowInvalid([WorkflowError("settings", message, task_id)]) from exc
