"""The Job controller (batch/v1), as far as simrun's image builds use it.

A Job creates pods from its template (named `<job>-<5 chars>`, labelled
`batch.kubernetes.io/job-name`, `job-name`, `batch.kubernetes.io/controller-uid`,
`controller-uid`, owned by the Job) up to `parallelism` at a time until `completions`
(default 1) succeeded; a failed pod is replaced until more than `backoffLimit` (default 6)
failed. It then ends with the conditions Kubernetes 1.31+ writes: `SuccessCriteriaMet` and
`Complete`, or `FailureTarget` and `Failed` (reason `BackoffLimitExceeded`, or
`DeadlineExceeded` after `activeDeadlineSeconds` on the simulator's clock), deletes its pods
that still run, and is deleted `ttlSecondsAfterFinished` after it ended (background
propagation). Not simulated: indexed completion, pod failure policies, suspend, and
`restartPolicy: OnFailure` restarts (treated as Never).
"""

from __future__ import annotations

import copy
import secrets
from typing import Any

from tests.sim.clock import parse_timestamp
from tests.sim.resources import JOBS, PODS
from tests.sim.store import Obj, Store, meta

ENDED = ("Complete", "Failed")


def _finished(job: Obj) -> dict[str, Any] | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ENDED and condition.get("status") == "True":
            return condition
    return None


class JobController:
    """Runs Jobs' pods and reports the Jobs."""

    name = "jobs"

    def __init__(self, store: Store) -> None:
        self.store = store

    def step(self) -> None:
        """Advance every Job once."""
        pods = self.store.objects(PODS)[0]
        for job in self.store.objects(JOBS)[0]:
            if meta(job).get("deletionTimestamp"):
                continue
            uid = meta(job)["uid"]
            own = [
                p
                for p in pods
                if any(r.get("uid") == uid for r in meta(p).get("ownerReferences") or [])
            ]
            ended = _finished(job)
            if ended is not None:
                self._expire(job, ended)
            else:
                self._advance(job, own)

    def _expire(self, job: Obj, ended: dict[str, Any]) -> None:
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        stamp = ended.get("lastTransitionTime")
        if ttl is not None and stamp and self.store.clock.time() >= parse_timestamp(stamp) + ttl:
            self.store.delete(
                JOBS, meta(job)["namespace"], meta(job)["name"], propagation="Background"
            )

    def _advance(self, job: Obj, pods: list[Obj]) -> None:
        spec = job.get("spec") or {}
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
        active = [
            p
            for p, ph in zip(pods, phases, strict=True)
            if ph not in ("Succeeded", "Failed") and not meta(p).get("deletionTimestamp")
        ]
        started = (job.get("status") or {}).get("startTime") or self.store.clock.stamp()
        deadline = spec.get("activeDeadlineSeconds")
        outcome: tuple[str, str, str] | None = None
        if succeeded >= int(spec.get("completions", 1)):
            outcome = (
                "Complete",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
        elif failed > int(spec.get("backoffLimit", 6)):
            outcome = (
                "Failed",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
        elif (
            deadline is not None and self.store.clock.time() >= parse_timestamp(started) + deadline
        ):
            outcome = (
                "Failed",
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            )
        elif len(active) < int(spec.get("parallelism", 1)) and succeeded + len(active) < int(
            spec.get("completions", 1)
        ):
            active.append(self._create_pod(job))
        stamp = self.store.clock.stamp()

        def apply(o: Obj) -> None:
            job_status = o.setdefault("status", {})
            job_status.update(
                startTime=started,
                active=len(active),
                succeeded=succeeded,
                failed=failed,
                ready=0,
                terminating=0,
            )
            if outcome is not None:
                kind, reason, message = outcome
                first = "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget"
                job_status["active"] = 0
                job_status["conditions"] = [
                    {
                        "type": t,
                        "status": "True",
                        "reason": reason,
                        "message": message,
                        "lastProbeTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                    for t in (first, kind)
                ]
                if kind == "Complete":
                    job_status["completionTime"] = stamp

        self.store.modify(JOBS, meta(job)["namespace"], meta(job)["name"], apply)
        if outcome is not None:
            for pod in active:
                self.store.delete(PODS, meta(pod)["namespace"], meta(pod)["name"])

    def _create_pod(self, job: Obj) -> Obj:
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        name, uid = meta(job)["name"], meta(job)["uid"]
        labels = {
            **(template.get("metadata") or {}).get("labels", {}),
            "batch.kubernetes.io/controller-uid": uid,
            "controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "job-name": name,
        }
        pod = {
            "metadata": {
                **(template.get("metadata") or {}),
                "name": f"{name}-{secrets.token_hex(3)[:5]}",
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": name,
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template.get("spec") or {},
        }
        return self.store.create(PODS, meta(job)["namespace"], pod)
