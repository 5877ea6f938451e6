"""A workflow's tasks as a submission plans them: resources resolved, units counted, pods
planned on the nodes as they are. A submission writes these as its `Task` rows; an estimate
(`runs.selectors.task_estimates`) shows them without submitting."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from runs import resources
from runs.environments import model_environment
from runs.models.observation import MERGE
from runs.observations import history
from runs.planner import plan_task
from runs.plans import Node, ResourcesJson, TaskPlanJson
from runs.plugin_metadata import SERVICE_ENVIRONMENT, environment_at, service_environment
from runs.store import local_package_rules, store
from runs.task_types import Types, registry
from runs.type_refusals import SettingsInvalid, TooManyUnits, TypeUnavailable, UnitsFailed
from runs.workflow import SplitMode, Workflow, WorkflowError, WorkflowInvalid


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


def max_units() -> int:
    from django.conf import settings

    limit: int = settings.SIMRUN_MAX_UNITS_PER_TASK
    return limit


def types_for_model(model: str | None) -> Types:
    """The types a run of `model` (a snapshot digest) is checked and planned with: those of
    the model's environment once it is built here (a local virtual environment), else those
    of the service's own environment (a model without a `pyproject.toml` runs in it; on a
    cluster, whose model environments are images, it holds the service's copy of the
    plugins, and the run's messages name a copy that differs)."""
    if not model:
        return registry()
    ref, _ = model_environment(store().snapshot(model), local_rules=local_package_rules())
    if ref == SERVICE_ENVIRONMENT:
        return registry()
    built = environment_at(store().environments, ref)
    return registry(built or service_environment())


def plan_tasks(
    spec: Workflow,
    *,
    nodes: list[Node],
    model: str | None,
    split: SplitMode | None,
    tier: str,
    reserve: str | None,
    types: Types | None = None,
) -> list[PlannedTask]:
    """Every task of `spec` in topological order, its resources resolved (hint, history,
    workflow) and its pods planned on `nodes`: the rows a submission writes, and what an
    estimate shows. WorkflowInvalid when a plugin's `units()` raises or lists more units
    than a task may have (SIMRUN_MAX_UNITS_PER_TASK); PlanRefused."""
    types = types if types is not None else types_for_model(model)
    model_dir = store().snapshot(model) if model else None
    largest = max((n.memory_gb for n in nodes), default=None)
    rows = []
    for position, task in enumerate(spec.order()):
        info = types[task.type]
        units = None
        if info.splittable:
            units = count_units(types, task.id, task.type, task.settings, model_dir)
        resolved = resources.resolve(
            hint=info.hint,
            history=history(task_type=task.type, model_digest=model or ""),
            overrides=task.resources,
            node_memory_gb=largest,
            merges=history(task_type=task.type, model_digest=model or "", role=MERGE)
            if info.splittable
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
            splittable=info.splittable,
        )
        rows.append(
            PlannedTask(
                task_id=task.id,
                position=position,
                type=task.type,
                splittable=info.splittable,
                settings=task.settings,
                inputs=dict(task.inputs),
                dependencies=task.dependencies(),
                resources=resolved.to_json(),
                plan=plan.to_json(),
                units_total=units,
            )
        )
    return rows


def count_units(
    types: Types,
    task_id: str,
    type_name: str,
    settings: dict[str, Any],
    model_dir: Path | None,
    *,
    out: Path | None = None,
) -> int:
    """The number of units the plugin lists for a task (written to `out` when given);
    WorkflowInvalid naming the task and the plugin when its `units()` raises (a
    SettingsError, or any bug of the plugin), its host fails, or it lists more units than a
    task may have."""
    try:
        return types.units(
            type_name, settings, task_id=task_id, model_dir=model_dir, limit=max_units(), out=out
        )
    except TooManyUnits as exc:
        message = (
            f"{exc}: make each unit do more (SIMRUN_MAX_UNITS_PER_TASK is {exc.limit:,}; "
            f"raised by {types.origin(type_name)})"
        )
    except UnitsFailed as exc:
        message = str(exc)
        if exc.settings_error and model_dir is None:  # what the user can change: a flag
            message += (
                "; this submission has no model snapshot: give the model's directory with "
                "`simrun submit --source DIR` (API: `sources`, the model first)"
            )
    except SettingsInvalid as exc:
        message = str(exc)
    except TypeUnavailable as exc:
        message = str(exc)
    raise WorkflowInvalid([WorkflowError("settings", message, task_id)])
