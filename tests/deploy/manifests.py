"""Reading, building and validating the deployment under deploy/, for the tests beside this.

Builds use `kubectl kustomize` (the kustomize built into kubectl, v5.5 here), which the
machine image carries; no kustomize of our own. Objects of Kubernetes' own kinds validate
against the schemas that kubernetes-validate bundles for KUBERNETES_VERSION, strictly
(unknown fields are errors); Kueue's objects validate against kueue_schemas.py.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from kubernetes_validate import utils as kubernetes_schemas
from referencing import Registry, Resource

from tests.deploy.kueue_schemas import KUEUE_SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CLUSTER = DEPLOY / "cluster"
K3D = DEPLOY / "k3d"
STANDINS = Path(__file__).resolve().parent / "standins"

KUBERNETES_VERSION = "1.35"
"""The Kubernetes of the cluster (k3s v1.35): every object must be valid there."""

NAMESPACE = "simrun"

Obj = dict[str, Any]


def documents(path: Path) -> list[Obj]:
    """The non-empty YAML documents of a file."""
    with path.open() as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc is not None]


def kubectl() -> str:
    """The kubectl whose built-in kustomize builds the kustomizations."""
    found = shutil.which("kubectl")
    if found is None:
        raise AssertionError("kubectl is not installed: it builds the kustomizations")
    return found


def build(directory: Path) -> list[Obj]:
    """The objects `kubectl kustomize` renders for a kustomization directory."""
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"kustomize build of {directory} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


def vendor_standins(deploy_copy: Path) -> None:
    """Run deploy/vendor.sh of a copy of deploy/ with the stand-in release manifests.

    The stand-ins hold only the objects simrun's patches touch, under the names of the real
    releases, so the controllers' kustomizations can be built without the internet.
    """
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "ARGO_URL": (STANDINS / "argo-namespace-install.yaml").as_uri(),
        "KUEUE_URL": (STANDINS / "kueue-manifests.yaml").as_uri(),
    }
    subprocess.run(
        ["bash", str(deploy_copy / "vendor.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def validation_errors(obj: Obj) -> list[str]:
    """Why an object is invalid for the cluster; empty when it is valid.

    An object of a kind neither schema source knows is an error too: nothing goes unchecked.
    """
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    validator = _validator(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if validator is None:
        return [f"{name}: no schema for {obj.get('apiVersion')} {obj.get('kind')}"]
    return [f"{name}: {_path(e)}: {e.message}" for e in validator.iter_errors(obj)]


@functools.cache
def _validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    """The validator of a kind: Kueue's from kueue_schemas, else the strict schema that
    kubernetes-validate bundles for KUBERNETES_VERSION (the same files and resolution as its
    validate(), loaded once per kind instead of once per object)."""
    kueue = KUEUE_SCHEMAS.get((api_version, kind))
    if kueue is not None:
        return jsonschema.Draft202012Validator(kueue)
    directory = f"kubernetes-json-schema/v{_bundled_version()}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kubernetes_schemas.schema_contents(
            f"{directory}/{kind.lower()}-{group_version}.json", KUBERNETES_VERSION
        )
    except FileNotFoundError:
        return None
    registry: Registry = Resource.from_contents(schema) @ Registry()
    registry = _definitions(directory) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


@functools.cache
def _definitions(directory: str) -> Resource:
    return Resource.from_contents(
        kubernetes_schemas.schema_contents(f"{directory}/_definitions.json", KUBERNETES_VERSION)
    )


@functools.cache
def _bundled_version() -> str:
    """The newest bundled schema version not newer than KUBERNETES_VERSION (must exist)."""
    versions = [
        v
        for v in kubernetes_schemas.all_versions()
        if kubernetes_schemas.major_minor(v) == KUBERNETES_VERSION
    ]
    if not versions:
        raise AssertionError(f"kubernetes-validate bundles no schemas for {KUBERNETES_VERSION}")
    return versions[-1]


def _path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "(top)"


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    """The one object of a kind and name; fails the test when there is none or more."""
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind}/{name}, found {len(found)}")
    return found[0]


def workloads(objects: list[Obj]) -> list[Obj]:
    """The Deployments and StatefulSets among the objects."""
    return [o for o in objects if o["kind"] in {"Deployment", "StatefulSet"}]


def containers(workload: Obj) -> list[Obj]:
    """Every container of a workload's pod template, init containers first."""
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]
