"""Environment images: built by a Job of buildctl, looked up in the registry's API (B6, B7)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cluster.argo import images
from cluster.argo.backend import ArgoBackend
from cluster.argo.config import ClusterConfig
from tests.cluster.argo.lab import Lab
from tests.sim.resources import CONFIGMAPS, JOBS, SECRETS

CONTEXT = {"pyproject.toml": b"[project]\nname = 'model'\n", "uv.lock": b"version = 1\n"}
DIGEST = "ab" * 32
CONFIG = ClusterConfig(registry="registry.lab:5000", default_image="registry.lab:5000/svc:1")


def test_an_environment_names_an_image_of_the_registry_and_service_the_default() -> None:
    assert (
        images.environment_image(DIGEST, CONFIG)
        == f"registry.lab:5000/simrun-environments:{DIGEST}"
    )
    assert images.environment_image("service", CONFIG) == "registry.lab:5000/svc:1"
    assert images.manifest_url(DIGEST, CONFIG) == (
        f"http://registry.lab:5000/v2/simrun-environments/manifests/{DIGEST}"
    )
    assert images.manifest_url("registry.lab:5000/a/b@sha256:00", CONFIG).endswith(
        "/v2/a/b/manifests/sha256:00"
    )


@pytest.mark.parametrize("ref", ["docker.io/library/python:3.13", "python:3.13", "other:5000/x:1"])
def test_an_image_outside_the_cluster_registry_is_refused(ref: str) -> None:
    """B7."""
    with pytest.raises(ValueError, match="not in the cluster's registry"):
        images.manifest_url(ref, CONFIG)


@pytest.mark.parametrize(
    "context",
    [
        {"src/model.py": b"x = 1\n"},
        {"..": b""},
        {"big.bin": b"\0" * 900_000},
    ],
)
def test_a_context_with_a_directory_or_too_large_for_a_configmap_is_refused(
    context: dict[str, bytes],
) -> None:
    """B6."""
    with pytest.raises(ValueError):
        images.check_context(context)


def test_the_registry_is_asked_whether_it_has_an_image(sim_lab: Lab) -> None:
    """B7: found and not found from the registry's API; any other answer is an error."""
    sim = sim_lab.sim
    assert sim is not None and sim.registry is not None
    assert not sim_lab.backend.has_image(DIGEST)
    sim.registry.add_image(f"{sim.registry.host}/simrun-environments:{DIGEST}")
    assert sim_lab.backend.has_image(DIGEST)
    assert ("HEAD", f"/v2/simrun-environments/manifests/{DIGEST}") in sim.registry.requests
    sim.registry.answer_with(500)
    with pytest.raises(RuntimeError, match="neither found nor not found"):
        sim_lab.backend.has_image(DIGEST)
    with pytest.raises(ValueError):
        sim_lab.backend.has_image("docker.io/library/python:3.13")


class _AuthRegistry(BaseHTTPRequestHandler):
    """A registry that wants basic credentials `lab:secret`."""

    seen: list[str | None] = []

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_HEAD(self) -> None:
        header = self.headers.get("Authorization")
        self.seen.append(header)
        wanted = "Basic " + base64.b64encode(b"lab:secret").decode()
        self.send_response(200 if header == wanted else 401)
        self.send_header("Content-Length", "0")
        if header != wanted:
            self.send_header("WWW-Authenticate", 'Basic realm="lab"')
        self.end_headers()


@pytest.fixture
def auth_registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AuthRegistry)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_registry_credentials_come_from_the_optional_secret(
    sim_lab: Lab, auth_registry: str
) -> None:
    """B7: without the Secret the registry refuses (an error); with it the image is found."""
    assert sim_lab.sim is not None
    backend = ArgoBackend(replace(sim_lab.config, registry=auth_registry), sim_lab.sim.api_client())
    sim_lab.made.append(backend)
    with pytest.raises(RuntimeError, match="401"):
        backend.has_image(DIGEST)
    config = {"auths": {auth_registry: {"auth": base64.b64encode(b"lab:secret").decode()}}}
    secret = {
        "metadata": {"name": "simrun-registry-auth"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }
    sim_lab.sim.store.create(SECRETS, sim_lab.namespace, secret)
    assert backend.has_image(DIGEST)


def test_an_image_is_built_by_a_job_of_buildctl_with_its_context_in_a_configmap(
    sim_lab: Lab,
) -> None:
    """B6: the Job runs buildctl against the cluster's BuildKit, its context is a ConfigMap
    owned by the Job, the image is pushed; the Job and its ConfigMap go once it is done."""
    sim = sim_lab.sim
    assert sim is not None and sim.registry is not None
    sim_lab.backend.build_image(CONTEXT, DIGEST)

    [build] = sim.buildkit.builds
    image = f"{sim.registry.host}/simrun-environments:{DIGEST}"
    assert (build.image, build.succeeded) == (image, True)
    assert build.context["pyproject.toml"] == CONTEXT["pyproject.toml"].decode()
    assert build.context["Dockerfile"] == images.DOCKERFILE
    assert sim_lab.backend.has_image(DIGEST)
    name = images.build_name(image)
    assert sim.get(JOBS, name) is None
    assert sim.get(CONFIGMAPS, name) is None


def test_the_build_job_pushes_with_the_optional_auth_secret_and_keeps_off_workers() -> None:
    """B6: the Secret is mounted as buildctl's docker config, optional; the build's pods have
    the infrastructure's affinity off the worker nodes."""
    job = images.build_job("registry.lab:5000/simrun-environments:x", CONFIG)
    spec = job["spec"]["template"]["spec"]
    auth = next(v for v in spec["volumes"] if v["name"] == "auth")
    assert auth["secret"] == {
        "secretName": "simrun-registry-auth",
        "optional": True,
        "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
    }
    [buildctl] = spec["containers"]
    assert buildctl["command"][:3] == ["buildctl", "--addr", "tcp://buildkitd:1234"]
    assert (
        "type=image,name=registry.lab:5000/simrun-environments:x,push=true" in buildctl["command"]
    )
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] == "NotIn"


def test_a_failed_build_is_an_error_with_the_end_of_its_log(sim_lab: Lab) -> None:
    """B6."""
    assert sim_lab.sim is not None
    sim_lab.sim.buildkit.fail_next("uv could not resolve numpy==0.0.1")
    with pytest.raises(RuntimeError, match="uv could not resolve numpy"):
        sim_lab.backend.build_image(CONTEXT, DIGEST)
    assert not sim_lab.backend.has_image(DIGEST)


def test_a_build_that_takes_too_long_is_a_timeout_and_its_job_is_removed(sim_lab: Lab) -> None:
    """B6."""
    sim = sim_lab.sim
    assert sim is not None and sim.registry is not None
    sim.buildkit.hang()
    backend = ArgoBackend(replace(sim_lab.config, build_timeout_s=1.0), sim.api_client())
    sim_lab.made.append(backend)
    with pytest.raises(TimeoutError):
        backend.build_image(CONTEXT, DIGEST)
    image = f"{sim.registry.host}/simrun-environments:{DIGEST}"
    assert sim.get(JOBS, images.build_name(image)) is None


def test_a_context_too_large_creates_no_job(sim_lab: Lab) -> None:
    """B6: refused before anything is created."""
    assert sim_lab.sim is not None
    with pytest.raises(ValueError, match="too large"):
        sim_lab.backend.build_image({"blob": b"\1" * 2_000_000}, DIGEST)
    assert sim_lab.sim.store.objects(JOBS)[0] == []
