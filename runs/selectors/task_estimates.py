"""What a submission would do, without doing it: resources, plan and seconds per task (S5).

The same resolution and planning a submission makes (`runs.services.submission`), on the
nodes as they are now, plus the expected seconds of each split task from its history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runs.estimates import estimate
from runs.models import Identity, Snapshot
from runs.observations import history
from runs.planned_tasks import plan_tasks, types_for_model
from runs.plans import Node, ResourcesJson, TaskPlan, TaskPlanJson
from runs.priorities import tier_of
from runs.refusals import SubmissionRefused
from runs.selectors.servers import schedulable_nodes
from runs.task_types import Types
from runs.validation import load, load_data
from runs.workflow import SplitMode, Workflow


@dataclass(frozen=True)
class TaskEstimateView:
    task_id: str
    type: str
    units: int | None
    resources: ResourcesJson
    plan: TaskPlanJson
    seconds: float | None


def types_for_sources(sources: list[str]) -> Types:
    """The types a workflow with these sources is checked with: the model environment's once
    built, else the service's own (an unknown snapshot: the service's own)."""
    model = sources[0] if sources else None
    if model and not Snapshot.objects.filter(digest=model).exists():
        model = None
    return types_for_model(model)


def estimate_workflow(
    *,
    identity: Identity,
    workflow: str | dict[str, Any] | Workflow,
    sources: list[str],
    split: SplitMode | None = None,
    reserve: str | None = None,
    nodes: list[Node] | None = None,
) -> list[TaskEstimateView]:
    """Every task's estimate, in topological order, planned on the backend's nodes (or on
    `nodes`), the workflow checked with the types of the model's environment (the service's
    own until it is built). Raises WorkflowInvalid, SubmissionRefused or PlanRefused."""
    known = set(Snapshot.objects.filter(digest__in=sources).values_list("digest", flat=True))
    missing = [d for d in sources if d not in known]
    if missing:
        raise SubmissionRefused(f"sources: unknown snapshot(s) {', '.join(missing)}")
    types = types_for_model(sources[0] if sources else None)
    if isinstance(workflow, str):
        workflow = load(workflow, types=types)
    elif not isinstance(workflow, Workflow):
        workflow = load_data(workflow, types=types)
    if nodes is None:
        nodes = schedulable_nodes()
    reserve = reserve or workflow.defaults.reserve
    if reserve and not any(n.name == reserve for n in nodes):
        names = ", ".join(n.name for n in nodes) or "none"
        raise SubmissionRefused(f"reserve: no node named {reserve!r} (nodes: {names})")
    model = sources[0] if sources else None
    rows = plan_tasks(
        workflow,
        nodes=nodes,
        model=model,
        split=split,
        tier=tier_of(identity.kind),
        reserve=reserve,
        types=types,
    )
    views = []
    for row in rows:
        plan = TaskPlan.from_json(row["plan"])
        seconds = estimate(
            units=row["units_total"],
            plan=plan,
            history=history(task_type=row["type"], model_digest=model or ""),
            splittable=row["splittable"],
        )
        views.append(
            TaskEstimateView(
                task_id=row["task_id"],
                type=row["type"],
                units=row["units_total"],
                resources=row["resources"],
                plan=row["plan"],
                seconds=seconds,
            )
        )
    return views
