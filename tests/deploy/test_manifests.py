"""Every manifest under deploy/ parses, is part of a kustomization, and is valid for its API."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.deploy.manifests import (
    DEPLOY,
    Obj,
    documents,
    find,
    validation_errors,
)
from tests.sim.schemas import KUBERNETES_VERSION

# YAML files under deploy/ that are no Kubernetes manifests, and what checks them.
NOT_MANIFESTS = {
    "compose.yaml": "test_compose.py",
    "tokens.example.yaml": "test_compose.py",
    "k3d/k3d-cluster.yaml": "test_kustomize.py",
}


def yaml_files() -> list[Path]:
    return sorted(
        p
        for p in DEPLOY.rglob("*.y*ml")
        if "vendor" not in p.relative_to(DEPLOY).parts and p.suffix in {".yaml", ".yml"}
    )


def kustomizations() -> list[Path]:
    return [p for p in yaml_files() if p.name == "kustomization.yaml"]


def referenced_files() -> dict[Path, str]:
    """Every file a kustomization names, with how: resource, patch or component."""
    found: dict[Path, str] = {}
    for kustomization in kustomizations():
        (spec,) = documents(kustomization)
        here = kustomization.parent
        for entry in spec.get("resources", []):
            found[(here / entry).resolve()] = "resource"
        for entry in spec.get("components", []):
            found[(here / entry).resolve()] = "component"
        for patch in spec.get("patches", []):
            if "path" in patch:
                found[(here / patch["path"]).resolve()] = "patch"
    return found


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_file_parses(path: Path) -> None:
    assert documents(path), f"{path} holds no YAML document"


def test_every_manifest_is_part_of_a_kustomization() -> None:
    referenced = referenced_files()
    orphans = [
        str(p.relative_to(DEPLOY))
        for p in yaml_files()
        if p.name != "kustomization.yaml"
        and str(p.relative_to(DEPLOY)) not in NOT_MANIFESTS
        and p.resolve() not in referenced
    ]
    assert orphans == []


def test_every_file_a_kustomization_names_exists() -> None:
    missing = [
        str(p)
        for p in referenced_files()
        if not p.exists() and "vendor" not in p.parts  # vendor/ is fetched by vendor.sh
    ]
    assert missing == []


def resource_documents() -> list[tuple[str, Obj]]:
    """Every object of every file that a kustomization takes as a resource, as written."""
    found = []
    for path, how in sorted(referenced_files().items()):
        if how == "resource" and path.is_file():
            for doc in documents(path):
                name = f"{path.relative_to(DEPLOY)}:{doc['kind']}/{doc['metadata']['name']}"
                found.append((name, doc))
    return found


@pytest.mark.parametrize(
    "obj", [d for _, d in resource_documents()], ids=[n for n, _ in resource_documents()]
)
def test_every_object_as_written_is_valid(obj: Obj) -> None:
    assert validation_errors(obj) == []


def test_every_object_of_the_cluster_build_is_valid(cluster_objects: list[Obj]) -> None:
    errors = [e for obj in cluster_objects for e in validation_errors(obj)]
    assert errors == []


def test_every_object_of_the_k3d_build_is_valid(k3d_objects: list[Obj]) -> None:
    errors = [e for obj in k3d_objects for e in validation_errors(obj)]
    assert errors == []


def test_the_patched_controllers_are_valid(
    argo_objects: list[Obj], kueue_objects: list[Obj]
) -> None:
    errors = [e for obj in [*argo_objects, *kueue_objects] for e in validation_errors(obj)]
    assert errors == []


def test_validation_rejects_a_misspelt_field_of_a_kubernetes_kind(
    cluster_objects: list[Obj],
) -> None:
    broken = copy.deepcopy(find(cluster_objects, "Deployment", "simrun-web"))
    broken["spec"]["template"]["spec"]["serviceAcountName"] = "simrun"
    assert validation_errors(broken), f"strict {KUBERNETES_VERSION} schemas accept a typo"


def test_validation_rejects_an_unknown_preemption_policy_of_kueue(
    cluster_objects: list[Obj],
) -> None:
    broken = copy.deepcopy(find(cluster_objects, "ClusterQueue", "simrun"))
    broken["spec"]["preemption"]["withinClusterQueue"] = "Always"
    assert validation_errors(broken)


def test_validation_rejects_a_kind_it_has_no_schema_for() -> None:
    unknown = {"apiVersion": "example.org/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    assert validation_errors(unknown) == ["Gadget/g: no schema for example.org/v1 Gadget"]
