"""Retry nodes: `processNodeRetries` and the retry branch of `executeTemplate` (operator.go).

A template with a `retryStrategy` runs as a Retry node whose children are the attempts
`<node>(0)`, `<node>(1)` ... (`nodeFlag.retried`). While an attempt is unfinished the Retry
node has its phase: Pending while the attempt's pod waits (gated by Kueue, unscheduled),
Running once it runs. That is what seed 003 (K1) saw on a real cluster ("Pending (its Retry
node too)"); Argo's code initialises the node Running and this simulator follows the seed
where the two differ. After a failed
attempt, in this order: under `shutdown` the Retry node takes the attempt's phase with
`Stopped with strategy '<S>'`; a `backoff` waits `duration * factor^(attempts-1)` (capped)
from the attempt's end on the simulator's clock (`Backoff for ...`); the policy
(`retryPolicy`, default OnFailure, Always when only an expression is given) may refuse;
`len(attempts) > limit` gives `No more retries left`; `expression` is evaluated with
`retries` and `lastRetry.{exitCode,status,duration,message}` (exitCode "-1" without one) and
false gives `retryStrategy.expression evaluated to false`.

An attempt's template is substituted with `retries` = its number and `lastRetry.*` of the
previous attempt (`lastRetry.exitCode` "0" for the first attempt and after an attempt without
exit code). When the pod of an unfinished attempt has to be created again (it was deleted
while still Pending), Argo takes `lastRetry` from that unfinished attempt itself, so its
`lastRetry.exitCode` is "0": the new pod gets the first attempt's values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.sim.argo.expressions import ExprError, evaluate_bool, nested
from tests.sim.argo.nodes import FAILED, exit_code, fulfilled
from tests.sim.argo.templates import pod_name, substitute
from tests.sim.clock import parse_timestamp

if TYPE_CHECKING:
    from tests.sim.argo.operation import Operation

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "ms": 0.001}


def duration_seconds(value: Any) -> float:
    """An Argo duration (`10`, `"10"`, `"30s"`, `"2m"`, `"1h"`) in seconds."""
    text = str(value).strip()
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return float(text[: -len(unit)]) * _UNITS[unit]
    return float(text)


def _duration(node: dict[str, Any]) -> float:
    start, end = node.get("startedAt"), node.get("finishedAt")
    return parse_timestamp(end) - parse_timestamp(start) if start and end else 0.0


def _last_retry(node: dict[str, Any] | None, no_code: str) -> dict[str, str]:
    if node is None:
        return {
            "lastRetry.exitCode": "0",
            "lastRetry.status": "",
            "lastRetry.duration": "0",
            "lastRetry.message": "",
        }
    return {
        "lastRetry.exitCode": exit_code(node) or no_code,
        "lastRetry.status": node.get("phase", ""),
        "lastRetry.duration": f"{_duration(node):g}",
        "lastRetry.message": node.get("message", ""),
    }


def _decide(
    op: Operation, retry: dict[str, Any], attempts: list[dict[str, Any]], strategy: dict[str, Any]
) -> str | None:
    """After a finished attempt: None to retry, "wait" for a backoff, else a final phase."""
    last = attempts[-1]
    if last["phase"] not in FAILED:
        op.mark(retry, "Succeeded")
        if last.get("outputs"):
            retry["outputs"] = dict(last["outputs"])
        return "Succeeded"
    if op.shutdown:
        op.mark(retry, last["phase"], f"Stopped with strategy '{op.shutdown}'")
        return last["phase"]
    backoff = strategy.get("backoff")
    if backoff:
        if backoff.get("maxDuration") and op.store.clock.time() > parse_timestamp(
            attempts[0]["startedAt"]
        ) + duration_seconds(backoff["maxDuration"]):
            op.mark(retry, last["phase"], "Max duration limit exceeded")
            return last["phase"]
        wait = duration_seconds(backoff.get("duration", 0)) * (
            float(backoff.get("factor", 1) or 1) ** (len(attempts) - 1)
        )
        if backoff.get("cap"):
            wait = min(wait, duration_seconds(backoff["cap"]))
        if op.store.clock.time() < parse_timestamp(last.get("finishedAt") or op.now) + wait:
            op.mark(retry, retry["phase"], f"Backoff for {wait:g} seconds")
            return "wait"
        op.mark(retry, retry["phase"], "")
    policy = strategy.get("retryPolicy") or (
        "Always" if strategy.get("expression") else "OnFailure"
    )
    on_failed = policy in ("Always", "OnFailure")
    on_error = policy in ("Always", "OnError")
    if (last["phase"] == "Failed" and not on_failed) or (last["phase"] == "Error" and not on_error):
        op.mark(retry, last["phase"], last.get("message", ""))
        return last["phase"]
    limit = strategy.get("limit")
    if limit is not None and len(attempts) > int(str(limit)):
        op.mark(retry, last["phase"], "No more retries left")
        return last["phase"]
    expression = strategy.get("expression")
    if expression:
        scope = {"retries": str(len(attempts) - 1), **_last_retry(last, "-1")}
        try:
            again = evaluate_bool(expression, nested(scope))
        except ExprError as error:
            op.mark(retry, "Error", f"retryStrategy.expression: {error}")
            return "Error"
        if not again:
            op.mark(retry, last["phase"], "retryStrategy.expression evaluated to false")
            return last["phase"]
    return None


def execute(
    op: Operation, name: str, template: dict[str, Any], scope: dict[str, str], boundary: str
) -> dict[str, Any]:
    """Run one step of the Retry node `name` of a container template."""
    retry = op.node(name) or op.init_node(
        name, "Retry", boundary, "Running", template["name"], inputs=template.get("inputs")
    )
    if fulfilled(retry):
        return retry
    attempts = [op.nodes[c] for c in retry.get("children") or [] if c in op.nodes]
    last = attempts[-1] if attempts else None
    if last is not None and not fulfilled(last):
        number, attempt_name = len(attempts) - 1, last["name"]
    else:
        if last is not None and _decide(op, retry, attempts, template["retryStrategy"]):
            return retry
        number, attempt_name = len(attempts), f"{name}({len(attempts)})"
        op.add_child(retry, attempt_name)
    attempt_scope = {
        **scope,
        "retries": str(number),
        **_last_retry(last, "0"),
        "pod.name": pod_name(op.name, attempt_name, template["name"]),
    }
    attempt = op.run_pod_node(
        attempt_name, substitute(template, attempt_scope), boundary, retried=True
    )
    if not fulfilled(attempt) and not fulfilled(retry):
        retry["phase"] = attempt["phase"]  # Pending while its attempt waits (seed 003 K1)
    return retry
