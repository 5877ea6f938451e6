"""Builds of the deployment, made once per session and shared by the tests of this package."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.deploy.manifests import CLUSTER, DEPLOY, K3D, Obj, build, vendor_standins


@pytest.fixture(scope="session")
def cluster_objects() -> list[Obj]:
    """What `kubectl kustomize deploy/cluster` renders."""
    return build(CLUSTER)


@pytest.fixture(scope="session")
def k3d_objects() -> list[Obj]:
    """What `kubectl kustomize deploy/k3d` renders."""
    return build(K3D)


@pytest.fixture(scope="session")
def vendored_deploy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of deploy/ whose vendor/ deploy/vendor.sh filled from the stand-in releases."""
    copy = tmp_path_factory.mktemp("deploy") / "deploy"
    shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns("vendor"))
    vendor_standins(copy)
    return copy


@pytest.fixture(scope="session")
def argo_objects(vendored_deploy: Path) -> list[Obj]:
    """Argo's controllers with simrun's settings, built on the stand-in release."""
    return build(vendored_deploy / "cluster" / "controllers" / "argo")


@pytest.fixture(scope="session")
def kueue_objects(vendored_deploy: Path) -> list[Obj]:
    """Kueue's controller kept off the workers, built on the stand-in release."""
    return build(vendored_deploy / "cluster" / "controllers" / "kueue")


def _overlay(deploy_copy: Path, name: str, base: str, component: str) -> Path:
    """An operator's overlay beside a copy of deploy/: `base` with `component` (both relative
    to deploy/), as docs/deploy.md shows it."""
    directory = deploy_copy.parent / name
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources:\n  - ../deploy/{base}\n"
        f"components:\n  - ../deploy/{component}\n"
    )
    return directory


@pytest.fixture(scope="session")
def offload_cluster_objects(vendored_deploy: Path) -> list[Obj]:
    """deploy/cluster with the component argo-offload, built as an operator's overlay."""
    return build(_overlay(vendored_deploy, "site", "cluster", "cluster/argo-offload"))


@pytest.fixture(scope="session")
def offload_argo_objects(vendored_deploy: Path) -> list[Obj]:
    """Argo's controllers with the component argo-offload, built as an operator's overlay."""
    return build(
        _overlay(vendored_deploy, "site-argo", "cluster/controllers/argo", "cluster/argo-offload")
    )
