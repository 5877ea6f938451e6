"""Environment images: their references, whether the registry has one, how one is built.

- A run's environment is `service` (the cluster's default image), a full image reference, or
  an environment digest, which names the image `<registry>/<repository>:<digest>`.
- Whether an image exists is asked the registry's HTTP API (B7): a manifest request answers
  200 (found) or 404 (not found); anything else is an error. Credentials, when the registry
  wants any, come from the optional Secret of the registry (a `.dockerconfigjson`).
- A build (B6) is a Job of `buildctl` that sends a flat context to the cluster's BuildKit and
  pushes the image; the context travels as a ConfigMap owned by the Job (`build_objects`), so
  deleting the Job deletes it. An init container copies the ConfigMap's files (symlinks in its
  volume) into a plain directory for buildctl.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from cluster.argo.config import SERVICE_ENVIRONMENT, ClusterConfig

CONFIGMAP_LIMIT_BYTES = 1024 * 1024 - 16 * 1024
"""What a ConfigMap holds, less room for its metadata (etcd's object limit is 1 MiB)."""
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
HTTP_TIMEOUT_S = 30
BACKSTOP_S = 300
BUILD_LABEL = "simrun/build"
CONTEXT_DIR = "/context"
SOURCE_DIR = "/source"
DOCKER_CONFIG_DIR = "/docker"
DOCKERFILE = """\
# syntax=docker/dockerfile:1
# The environment of a model, built by simrun (cluster/argo/images.py): its dependencies from
# its uv.lock, or resolved under the harness's constraints, and the harness, in /opt/simrun/env.
# Local packages (cluster/argo/build_context.py) are unpacked where the model's pyproject.toml
# names them (relative paths under the model directory), as the local backend installs them.
ARG BASE
FROM ${BASE}
USER root
WORKDIR /opt/simrun/model
COPY pyproject.toml uv.lock* constraints.txt* local-packages.tar.gz* ./
RUN set -e; \\
    requirements=requirements.txt; pins=requirements.txt; local=""; \\
    if [ -f local-packages.tar.gz ]; then \\
      tar -xzf local-packages.tar.gz -C / && rm local-packages.tar.gz; local=1; \\
    fi; \\
    if [ -f uv.lock ]; then \\
      uv export --frozen --no-dev --no-emit-project --no-hashes --no-header --no-annotate \\
        --output-file requirements.txt; \\
      if [ -n "$local" ]; then pins=""; fi; \\
    elif [ -n "$local" ]; then \\
      requirements=pyproject.toml; pins=constraints.txt; \\
    else \\
      uv pip compile pyproject.toml --find-links /opt/simrun/wheels \\
        --constraints constraints.txt --no-header --output-file requirements.txt; \\
    fi; \\
    uv venv /opt/simrun/env --python "$(command -v python3)"; \\
    uv pip install --python /opt/simrun/env/bin/python --find-links /opt/simrun/wheels \\
      -r "$requirements" ${pins:+--constraints "$pins"} simrun-harness
ENV PATH=/opt/simrun/env/bin:$PATH VIRTUAL_ENV=/opt/simrun/env
USER 1000:1000
"""


def environment_image(environment: str, config: ClusterConfig) -> str:
    """The image of a run's environment; ValueError when `service` has no default image."""
    if environment == SERVICE_ENVIRONMENT:
        if not config.default_image:
            raise ValueError(
                "the run has no environment of its own and SIMRUN_DEFAULT_IMAGE is not set"
            )
        return config.default_image
    if "/" in environment or ":" in environment:
        return environment
    return f"{config.registry}/{config.environment_repository}:{environment}"


def split_reference(ref: str, config: ClusterConfig) -> tuple[str, str]:
    """(repository, tag or digest) of an image of the cluster's registry; ValueError else."""
    image = environment_image(ref, config)
    prefix = f"{config.registry}/"
    if not image.startswith(prefix):
        raise ValueError(f"image {image!r} is not in the cluster's registry {config.registry}")
    rest = image[len(prefix) :]
    if "@" in rest:
        repository, _, reference = rest.partition("@")
    elif ":" in rest.rsplit("/", 1)[-1]:
        repository, _, reference = rest.rpartition(":")
    else:
        repository, reference = rest, "latest"
    if not repository or not reference:
        raise ValueError(f"image {image!r} names no repository")
    return repository, reference


def manifest_url(ref: str, config: ClusterConfig) -> str:
    """B7: the URL of an image's manifest in the registry's API."""
    repository, reference = split_reference(ref, config)
    return f"{config.registry_api}/v2/{repository}/manifests/{reference}"


def credentials(secret: Mapping[str, Any] | None, registry: str) -> tuple[str, str] | None:
    """The user and password for `registry` in a `.dockerconfigjson` Secret, if any."""
    data = (secret or {}).get("data") or {}
    encoded = data.get(".dockerconfigjson")
    if not encoded:
        return None
    auths = json.loads(base64.b64decode(encoded)).get("auths") or {}
    entry = (
        auths.get(registry) or auths.get(f"http://{registry}") or auths.get(f"https://{registry}")
    )
    if not entry:
        return None
    if entry.get("auth"):
        user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
        return user, password
    if entry.get("username"):
        return str(entry["username"]), str(entry.get("password", ""))
    return None


def _basic(user_password: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(":".join(user_password).encode()).decode()


def _bearer_token(challenge: str, auth: tuple[str, str] | None) -> str | None:
    """A token of the registry's token service for a `Bearer realm=...` challenge."""
    fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = fields.pop("realm", "")
    if not realm:
        return None
    query = "&".join(f"{k}={urllib.parse.quote(v)}" for k, v in sorted(fields.items()))
    request = urllib.request.Request(f"{realm}?{query}" if query else realm)
    if auth is not None:
        request.add_header("Authorization", _basic(auth))
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as reply:
        body = json.loads(reply.read() or b"{}")
    token = body.get("token") or body.get("access_token")
    return str(token) if token else None


def _head(url: str, authorization: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, method="HEAD", headers={"Accept": MANIFEST_TYPES})
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as reply:
            return reply.status, ""
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("WWW-Authenticate", "")


def registry_has(url: str, auth: tuple[str, str] | None) -> bool:
    """B7: whether the manifest at `url` exists; RuntimeError for any other answer."""
    try:
        code, challenge = _head(url, _basic(auth) if auth else None)
        if code == 401 and challenge.lower().startswith("bearer"):
            token = _bearer_token(challenge, auth)
            if token:
                code, _ = _head(url, f"Bearer {token}")
    except OSError as error:
        raise RuntimeError(f"the registry did not answer for {url}: {error}") from error
    if code == 200:
        return True
    if code == 404:
        return False
    raise RuntimeError(f"the registry answered {code} for {url}: neither found nor not found")


def check_context(context: Mapping[str, bytes]) -> int:
    """B6: the size of a flat build context; ValueError for a directory or too much data."""
    size = 0
    for name, data in context.items():
        if "/" in name or name in {"", ".", ".."} or not _KEY.match(name):
            raise ValueError(f"the build context must be flat files: {name!r} is not one")
        size += len(name) + len(base64.b64encode(data))
    size += len(DOCKERFILE)
    if size > CONFIGMAP_LIMIT_BYTES:
        raise ValueError(
            f"the build context ({size} bytes encoded) is too large for a ConfigMap "
            f"(at most {CONFIGMAP_LIMIT_BYTES})"
        )
    return size


def build_name(image: str) -> str:
    """The Job (and ConfigMap) of the build of `image`: one per image, so builders share it."""
    return f"simrun-build-{hashlib.sha256(image.encode()).hexdigest()[:16]}"


def context_data(context: Mapping[str, bytes]) -> tuple[dict[str, str], dict[str, str]]:
    """`data` (text files) and `binaryData` (the rest, base64) of the context's ConfigMap."""
    text: dict[str, str] = {"Dockerfile": DOCKERFILE}
    binary: dict[str, str] = {}
    for name, data in sorted(context.items()):
        try:
            text[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            binary[name] = base64.b64encode(data).decode()
    return text, binary


def _buildctl(image: str, config: ClusterConfig) -> list[str]:
    """The command that builds `image` from the context directory and pushes it."""
    return [
        "buildctl",
        "--addr",
        config.buildkit_addr,
        "build",
        "--frontend",
        "dockerfile.v0",
        "--local",
        f"context={CONTEXT_DIR}",
        "--local",
        f"dockerfile={CONTEXT_DIR}",
        "--opt",
        f"build-arg:BASE={config.base_image}",
        "--output",
        f"type=image,name={image},push=true",
    ]


OFF_WORKERS = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "simrun/worker", "operator": "NotIn", "values": ["true"]}
                    ]
                }
            ]
        }
    }
}
"""The infrastructure's affinity: a build never runs on a worker node."""


def _pod_spec(name: str, image: str, config: ClusterConfig) -> dict[str, Any]:
    """The build's pod: an init container copies the ConfigMap's files (symlinks in its
    volume) into a plain directory, then buildctl builds and pushes from there."""
    mounts = [{"name": "context", "mountPath": CONTEXT_DIR}]
    auth = {
        "secretName": config.registry_secret,
        "optional": True,
        "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
    }
    return {
        "restartPolicy": "Never",
        "affinity": OFF_WORKERS,
        "initContainers": [
            {
                "name": "context",
                "image": config.buildctl_image,
                "command": ["sh", "-c", f"cp -L {SOURCE_DIR}/* {CONTEXT_DIR}/"],
                "volumeMounts": [
                    {"name": "source", "mountPath": SOURCE_DIR, "readOnly": True},
                    *mounts,
                ],
            }
        ],
        "containers": [
            {
                "name": "buildctl",
                "image": config.buildctl_image,
                "command": _buildctl(image, config),
                "env": [{"name": "DOCKER_CONFIG", "value": DOCKER_CONFIG_DIR}],
                "volumeMounts": [
                    *mounts,
                    {"name": "auth", "mountPath": DOCKER_CONFIG_DIR, "readOnly": True},
                ],
            }
        ],
        "volumes": [
            {"name": "source", "configMap": {"name": name}},
            {"name": "context", "emptyDir": {}},
            {"name": "auth", "secret": auth},
        ],
    }


def build_job(image: str, config: ClusterConfig) -> dict[str, Any]:
    """The Job of buildctl that builds and pushes `image` from the context's ConfigMap."""
    name = build_name(image)
    labels = {BUILD_LABEL: name, "app.kubernetes.io/part-of": "simrun"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": config.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            # a backstop for a build whose waiting service died; the service times out first
            "activeDeadlineSeconds": int(config.build_timeout_s) + BACKSTOP_S,
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec(name, image, config)},
        },
    }


def context_config_map(
    image: str, context: Mapping[str, bytes], job: Mapping[str, Any], config: ClusterConfig
) -> dict[str, Any]:
    """The ConfigMap of a build's context, owned by its Job (deleted with it)."""
    text, binary = context_data(context)
    metadata = job["metadata"]
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": build_name(image),
            "namespace": config.namespace,
            "labels": {BUILD_LABEL: build_name(image)},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": text,
    }
    if binary:
        body["binaryData"] = binary
    return body


def job_outcome(job: Mapping[str, Any]) -> str | None:
    """`Complete` or `Failed` once a Job has ended (its condition), else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None
