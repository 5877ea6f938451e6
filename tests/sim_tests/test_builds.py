"""Jobs, the registry stub and the simulated BuildKit."""

from __future__ import annotations

from typing import Any

import httpx

from tests.sim import SimCluster
from tests.sim.fixtures import KubeApis
from tests.sim.resources import JOBS
from tests.sim_tests.manifests import pod


def build_job(name: str, image: str, context: str = "ctx", **spec: Any) -> dict[str, Any]:
    """A Job of buildctl with a ConfigMap as its context, as the backend makes it."""
    template = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "buildctl",
                    "image": "moby/buildkit:rootless",
                    "command": [
                        "buildctl",
                        "--addr",
                        "tcp://buildkitd:1234",
                        "build",
                        "--frontend",
                        "dockerfile.v0",
                        "--local",
                        "context=/ctx",
                        "--local",
                        "dockerfile=/ctx",
                        "--output",
                        f"type=image,name={image},push=true",
                    ],
                    "volumeMounts": [{"name": "ctx", "mountPath": "/ctx"}],
                }
            ],
            "volumes": [{"name": "ctx", "configMap": {"name": context}}],
        },
    }
    return {"metadata": {"name": name}, "spec": {"backoffLimit": 0, "template": template, **spec}}


def job_condition(cluster: SimCluster, name: str) -> str | None:
    found = cluster.get(JOBS, name) or {}
    types = [
        c["type"]
        for c in (found.get("status") or {}).get("conditions") or []
        if c["status"] == "True"
    ]
    return next((t for t in types if t in ("Complete", "Failed")), None)


def test_the_registry_answers_found_and_not_found(sim_cluster: SimCluster) -> None:
    """Whether the registry has an image is asked its HTTP API.

    The cluster side of B7 (docs/behaviours.md), as the simulator reproduces it.
    """
    registry = sim_cluster.registry
    assert registry is not None
    registry.add_image(f"{registry.host}/simrun/env:abc")
    found = httpx.head(f"{registry.url}/v2/simrun/env/manifests/abc")
    missing = httpx.get(f"{registry.url}/v2/simrun/env/manifests/other")
    assert found.status_code == 200 and found.headers["Docker-Content-Digest"].startswith("sha256:")
    assert missing.status_code == 404
    assert missing.json()["errors"][0]["code"] == "MANIFEST_UNKNOWN"


def test_the_registry_can_be_made_to_answer_neither(sim_cluster: SimCluster) -> None:
    """An answer that is neither found nor not found.

    The cluster side of B7 (docs/behaviours.md), as the simulator reproduces it.
    """
    assert sim_cluster.registry is not None
    sim_cluster.registry.answer_with(503)
    assert httpx.get(f"{sim_cluster.registry.url}/v2/a/manifests/b").status_code == 503


def test_a_build_job_pushes_its_image_and_completes(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """The Job of buildctl, its context a ConfigMap; the image lands in the registry.

    The cluster side of B6 (docs/behaviours.md), as the simulator reproduces it.
    """
    registry = sim_cluster.registry
    assert registry is not None
    image = f"{registry.host}/simrun/env:123"
    kube.core.create_namespaced_config_map(
        kube.namespace,
        {"metadata": {"name": "ctx"}, "data": {"Dockerfile": "FROM base", "uv.lock": "x"}},
    )
    kube.batch.create_namespaced_job(kube.namespace, build_job("build", image))
    sim_cluster.wait_for(lambda: job_condition(sim_cluster, "build"), what="the build's end")
    assert job_condition(sim_cluster, "build") == "Complete"
    assert registry.has_image(image)
    (build,) = sim_cluster.buildkit.builds
    assert (build.image, build.succeeded) == (image, True)
    assert build.context == {"Dockerfile": "FROM base", "uv.lock": "x"}


def test_a_failing_build_fails_its_job_with_the_error_in_the_log(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """A failed build.

    The cluster side of B6 (docs/behaviours.md), as the simulator reproduces it.
    """
    assert sim_cluster.registry is not None
    image = f"{sim_cluster.registry.host}/simrun/env:1"
    kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {"name": "ctx"}})
    sim_cluster.buildkit.fail_next("exit code: 1")
    kube.batch.create_namespaced_job(kube.namespace, build_job("build", image))
    sim_cluster.wait_for(lambda: job_condition(sim_cluster, "build"))
    job = kube.batch.read_namespaced_job("build", kube.namespace)
    assert (job.status.conditions[-1].type, job.status.conditions[-1].reason) == (
        "Failed",
        "BackoffLimitExceeded",
    )
    (build_pod,) = kube.core.list_namespaced_pod(
        kube.namespace, label_selector="job-name=build"
    ).items
    log = kube.core.read_namespaced_pod_log(
        build_pod.metadata.name, kube.namespace, _preload_content=False
    ).data
    assert b"error: failed to solve: exit code: 1" in log
    assert not sim_cluster.registry.has_image(image)


def test_a_hanging_build_runs_until_the_jobs_deadline(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {"name": "ctx"}})
    sim_cluster.buildkit.hang()
    kube.batch.create_namespaced_job(
        kube.namespace, build_job("build", "x/y:z", activeDeadlineSeconds=600)
    )
    sim_cluster.settle()
    assert job_condition(sim_cluster, "build") is None
    sim_cluster.advance(600)
    sim_cluster.wait_for(lambda: job_condition(sim_cluster, "build") == "Failed")
    job = kube.batch.read_namespaced_job("build", kube.namespace)
    assert job.status.conditions[-1].reason == "DeadlineExceeded"


def test_a_finished_job_goes_after_its_ttl_with_its_pods(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    job = {"metadata": {"name": "j"}, "spec": {"ttlSecondsAfterFinished": 60, "template": pod("x")}}
    kube.batch.create_namespaced_job(kube.namespace, job)
    sim_cluster.wait_for(lambda: job_condition(sim_cluster, "j") == "Complete")
    sim_cluster.advance(60)
    sim_cluster.wait_for(lambda: sim_cluster.get(JOBS, "j") is None and not sim_cluster.pods())
