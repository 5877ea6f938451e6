"""The local packages of a model in its image's build context (B6).

A model whose `pyproject.toml` names packages by local paths (`runs/local_packages.py`) is
built by the local backend from its snapshot directory. The cluster's build has only the flat
context of a ConfigMap, so the packages travel in it as one archive, `local-packages.tar.gz`,
whose members lie where the image's build finds them once unpacked at `/`: a package named by
a path relative to the model directory under the Dockerfile's model directory, one named by an
absolute path (or a `file://` URL) at that path. The archive is the same bytes for the same
files (sorted, no times or owners), so the build's ConfigMap is too.

The packages are read as the service names them (`runs/local_packages.py`): inside the
model's snapshot or an allowed directory, never through a link, within the limits; a context
naming any other is refused, and nothing of it is packed.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from runs.environments import LOCAL_PACKAGES_FILE, SOURCE_DIR_FILE
from runs.local_packages import (
    LocalPackage,
    LocalPackageRules,
    identity_text,
    local_packages,
    read_package,
)

LOCAL_ARCHIVE = "local-packages.tar.gz"
IMAGE_MODEL_DIR = PurePosixPath("/opt/simrun/model")  # the Dockerfile's WORKDIR


def image_path(package: LocalPackage, model_dir: Path) -> PurePosixPath:
    """Where the image's build finds a local package: where its pyproject.toml points."""
    if package.relative:
        model = Path(os.path.abspath(model_dir))
        return IMAGE_MODEL_DIR / package.path.relative_to(model).as_posix()
    return PurePosixPath(package.path.as_posix())


def with_local_packages(
    context: Mapping[str, bytes], rules: LocalPackageRules | None = None
) -> dict[str, bytes]:
    """The context, plus the archive of its local packages when it names any; `rules`: where
    they may lie besides the snapshot (default: only there).

    ValueError when it names some but not the model directory they are read from, when a
    package's files are no longer those its environment was named for, or when one lies
    where `rules` allow none (LocalPackageRefused)."""
    rules = rules or LocalPackageRules()
    found = dict(context)
    if LOCAL_PACKAGES_FILE not in context:
        return found
    source = context.get(SOURCE_DIR_FILE)
    if not source:
        raise ValueError(f"the build context lists local packages but has no {SOURCE_DIR_FILE}")
    model_dir = Path(source.decode())
    packages = local_packages(model_dir, rules)
    if identity_text(packages) != context[LOCAL_PACKAGES_FILE]:
        raise ValueError(
            "the local packages of the model changed since its environment was named; "
            "submit the run again"
        )
    found[LOCAL_ARCHIVE] = archive(packages, model_dir, rules)
    return found


def archive(packages: list[LocalPackage], model_dir: Path, rules: LocalPackageRules) -> bytes:
    """A tar.gz of the packages' files at their paths in the image (relative to `/`), read
    as `read_package` reads them (no link followed, within `rules`' limits)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for package in sorted(packages, key=lambda p: p.name):
            target = image_path(package, model_dir)
            for file in read_package(package, rules):
                name = str(target / file.path if file.path else target).lstrip("/")
                info = tarfile.TarInfo(name)
                info.size = len(file.data)
                info.mode = 0o755 if file.executable else 0o644
                tar.addfile(info, io.BytesIO(file.data))
    return gzip.compress(raw.getvalue(), mtime=0)
