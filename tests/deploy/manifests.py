"""Reading, building and validating the deployment under deploy/, for the tests beside this.

Builds use `kubectl kustomize` (the kustomize built into kubectl, v5.5 here), which the
machine image carries; no kustomize of our own. Objects validate as the simulator's API
server validates every write (`tests.sim.schemas`): Kubernetes' own kinds against the strict
schemas kubernetes-validate bundles for KUBERNETES_VERSION, Argo's against hera's models,
Kueue's against tests/sim/kueue_schemas.py; an unknown field is an error.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.sim.schemas import field_errors

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CLUSTER = DEPLOY / "cluster"
K3D = DEPLOY / "k3d"
STANDINS = Path(__file__).resolve().parent / "standins"

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

    The same check as the simulator's API server makes of every write (`tests.sim.schemas`).
    An object of a kind no schema knows is an error too: nothing goes unchecked.
    """
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    errors = field_errors(obj)
    if errors is None:
        return [f"{name}: no schema for {obj.get('apiVersion')} {obj.get('kind')}"]
    return [f"{name}: {e.path}: {e.message}" for e in errors]


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
