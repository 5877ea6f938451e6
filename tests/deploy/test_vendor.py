"""deploy/vendor.sh fetches the pinned releases into vendor/ and checks them when asked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.manifests import CLUSTER, DEPLOY, STANDINS, documents

VENDOR_SH = DEPLOY / "vendor.sh"


def run_vendor(
    tmp_path: Path, *args: str, argo: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "ARGO_URL": (argo or STANDINS / "argo-namespace-install.yaml").as_uri(),
        "KUEUE_URL": (STANDINS / "kueue-manifests.yaml").as_uri(),
        "VENDOR_DIR": str(tmp_path / "vendor"),
        "SUMS_FILE": str(tmp_path / "vendor.sha256"),
    }
    return subprocess.run(
        ["bash", str(VENDOR_SH), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def pinned(name: str) -> str:
    found = re.search(rf"^{name}=(v[0-9.]+)$", VENDOR_SH.read_text(), re.M)
    assert found is not None
    return found.group(1)


def test_the_releases_are_pinned_to_the_versions_the_design_was_verified_with() -> None:
    assert pinned("ARGO_VERSION") == "v4.1.6"
    assert pinned("KUEUE_VERSION") == "v0.20.5"
    text = VENDOR_SH.read_text()
    assert "argo-workflows/releases/download/$ARGO_VERSION/namespace-install.yaml" in text
    assert "kueue/releases/download/$KUEUE_VERSION/manifests.yaml" in text


def test_the_controllers_kustomizations_name_the_pinned_versions() -> None:
    assert pinned("ARGO_VERSION") in (CLUSTER / "controllers/argo/kustomization.yaml").read_text()
    assert pinned("KUEUE_VERSION") in (CLUSTER / "controllers/kueue/kustomization.yaml").read_text()


def test_vendoring_writes_each_release_with_a_kustomization_naming_it(tmp_path: Path) -> None:
    result = run_vendor(tmp_path)
    assert result.returncode == 0, result.stderr
    vendor = tmp_path / "vendor"
    argo = vendor / "argo-workflows" / "namespace-install.yaml"
    assert argo.read_bytes() == (STANDINS / "argo-namespace-install.yaml").read_bytes()
    assert documents(vendor / "argo-workflows" / "kustomization.yaml") == [
        {"resources": ["namespace-install.yaml"]}
    ]
    assert documents(vendor / "kueue" / "kustomization.yaml") == [{"resources": ["manifests.yaml"]}]
    assert "the sums were not checked" in result.stdout
    assert not list(vendor.rglob("*.part"))


def test_recorded_sums_pass_for_the_same_releases(tmp_path: Path) -> None:
    assert run_vendor(tmp_path, "--record").returncode == 0
    sums = (tmp_path / "vendor.sha256").read_text().splitlines()
    assert [line.split()[1] for line in sums] == [
        "argo-workflows/namespace-install.yaml",
        "kueue/manifests.yaml",
    ]
    again = run_vendor(tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "OK" in again.stdout


def test_recorded_sums_stop_a_changed_release(tmp_path: Path) -> None:
    assert run_vendor(tmp_path, "--record").returncode == 0
    changed = tmp_path / "changed.yaml"
    changed.write_text((STANDINS / "argo-namespace-install.yaml").read_text() + "# changed\n")
    result = run_vendor(tmp_path, argo=changed)
    assert result.returncode != 0
    assert "FAILED" in result.stdout


def test_a_download_that_fails_stops_the_script(tmp_path: Path) -> None:
    result = run_vendor(tmp_path, argo=tmp_path / "missing.yaml")
    assert result.returncode != 0
    assert not (tmp_path / "vendor" / "argo-workflows" / "namespace-install.yaml").exists()


@pytest.mark.parametrize("argument", ["--force", "record"])
def test_an_unknown_argument_is_refused(tmp_path: Path, argument: str) -> None:
    result = run_vendor(tmp_path, argument)
    assert result.returncode == 2
    assert "usage:" in result.stderr
