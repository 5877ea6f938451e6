"""Reading a crate to run it again: what it holds, every byte checked against its metadata.

A crate is read from a directory the service unpacked itself (`runs.services.crate_archives`:
files only, no link). Before anything of it is used:
- its metadata file is JSON-LD whose root declares a Workflow Run Crate profile (Process,
  Workflow or Provenance Run Crate): a crate of anything else holds no run to repeat;
- every file the metadata describes is in the crate and has the `sha256` (and size) the
  metadata gives it; a file that is missing or differs is named, as is a file described but
  deliberately not held (a local identifier: a crate exported metadata only);
- its main entity is the workflow; each source snapshot's files are exactly its manifest's,
  and the manifest's digest is the snapshot's name, so the snapshot made again here is the one
  the run used;
- the environment's `pyproject.toml` and `uv.lock` are the model snapshot's own.
What it yields is plain values (`CrateRun`): no path or id of the installation that made it
is needed to run it again. No Django here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

from runs.crates.profiles import KNOWN, RUN_PROFILES
from runs.crates.validation import METADATA_FILE, CrateUnreadable, declared_profiles

MANIFEST = ".simrun-manifest.json"
SNAPSHOTS = "snapshots/"
ENVIRONMENT = "environment/"
CONSTRAINTS = "constraints.txt"
CHUNK = 1024 * 1024


class CrateRefused(ValueError):
    """A crate that cannot be run again; the message names the file or entity and why."""


@dataclass(frozen=True)
class CrateFile:
    """A file of a snapshot in the crate: its path in the snapshot, where it is unpacked,
    its content digest and whether it is executable (the manifest's word: a zip keeps no
    mode)."""

    path: str
    source: Path
    sha256: str
    executable: bool


@dataclass(frozen=True)
class CrateSnapshot:
    digest: str
    name: str
    git_remote: str
    git_commit: str
    git_dirty: bool | None
    files: list[CrateFile]

    @property
    def bytes(self) -> int:
        return sum(f.source.stat().st_size for f in self.files)


@dataclass(frozen=True)
class CrateTool:
    """A task type as the crate's run used it: its plugin package and version."""

    type: str
    package: str
    version: str


@dataclass(frozen=True)
class CrateRun:
    """What a crate's run was made of, checked; enough to make the run again anywhere."""

    identifier: str
    metadata_sha256: str
    workflow: dict[str, Any]
    snapshots: list[CrateSnapshot]
    constraints: bytes | None
    tools: dict[str, CrateTool] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    """Each task output file's digest, by its path in the crate (`tasks/<task>/out/...`)."""

    @property
    def lineage(self) -> str:
        """How a run made from it names the crate: its identifier and its metadata's digest."""
        return f"{self.identifier[:120]} sha256:{self.metadata_sha256}"


def _relative(name: str) -> str | None:
    """`name` as a clean relative POSIX path that stays below its folder, else None."""
    path = PurePosixPath(name)
    if not name or "\x00" in name or path.is_absolute() or name.startswith("\\"):
        return None
    parts = [p for p in path.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise CrateRefused(f"{METADATA_FILE}: the key {key!r} appears twice in one object")
        found[key] = value
    return found


def sha256_of(path: Path) -> tuple[str, int]:
    """The SHA-256 and size of a file."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _ids(value: Any) -> list[str]:
    """The `@id`s of a property's value (one reference or a list of them)."""
    values = value if isinstance(value, list) else [value]
    return [v["@id"] for v in values if isinstance(v, dict) and isinstance(v.get("@id"), str)]


def _types(entity: dict[str, Any]) -> set[str]:
    value = entity.get("@type", [])
    return {value} if isinstance(value, str) else {t for t in value if isinstance(t, str)}


class _Crate:
    def __init__(self, root: Path) -> None:
        self.root = root
        metadata = root / METADATA_FILE
        try:
            text = metadata.read_bytes()
            data = json.loads(text, object_pairs_hook=_no_duplicates)
            entities = data["@graph"]
            self.graph: dict[str, dict[str, Any]] = {
                e["@id"]: e
                for e in entities
                if isinstance(e, dict) and isinstance(e.get("@id"), str)
            }
        except FileNotFoundError:
            raise CrateUnreadable(f"no {METADATA_FILE}: not an RO-Crate") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, CrateRefused):
                raise
            raise CrateUnreadable(f"{METADATA_FILE} is no RO-Crate metadata: {exc}") from None
        self.metadata_sha256 = hashlib.sha256(text).hexdigest()
        self.checked: dict[str, str] = {}  # crate path -> sha256, of every described file

    def entity(self, entity_id: str) -> dict[str, Any]:
        return self.graph.get(entity_id, {})

    def root_entity(self) -> dict[str, Any]:
        about = _ids(self.entity(METADATA_FILE).get("about"))
        root = self.graph.get(about[0]) if about else None
        if root is None:
            raise CrateUnreadable(f"{METADATA_FILE} names no root dataset (its `about`)")
        return root

    def check_profiles(self) -> None:
        declared = declared_profiles(self.root)
        if not RUN_PROFILES & set(declared):
            names = ", ".join(f"{KNOWN[u].name} ({u})" for u in sorted(RUN_PROFILES))
            said = ", ".join(declared) or "none"
            raise CrateRefused(
                f"the crate declares no Workflow Run Crate profile (it conforms to: {said}); "
                f"simrun runs again a crate that conforms to one of {names}"
            )

    def check_files(self) -> None:
        """Every described file is here with its digest and size; CrateRefused naming the
        first that is not."""
        for entity_id, entity in sorted(self.graph.items()):
            if "File" not in _types(entity) or entity_id == METADATA_FILE:
                continue
            if entity_id.startswith("#"):  # described, not held: a metadata-only crate's
                said = entity.get("localPath")
                name = said if isinstance(said, str) else entity_id
                raise CrateRefused(
                    f"file {name!r}: described by its digest, not held by the crate (a crate "
                    "exported with --metadata-only holds no sources, outputs or logs and cannot "
                    "be run again)"
                )
            path = self.path_of(entity_id)
            expected = entity.get("sha256")
            if not isinstance(expected, str):
                raise CrateRefused(f"file {path!r}: the metadata gives no sha256 to check it by")
            found = self.root / path
            if found.is_symlink() or not found.is_file():
                raise CrateRefused(f"file {path!r}: described by the metadata but not in the crate")
            sha, size = sha256_of(found)
            if sha != expected.lower():
                raise CrateRefused(
                    f"file {path!r}: its SHA-256 is {sha}, the metadata says {expected} "
                    "(changed after the crate was made)"
                )
            said = entity.get("contentSize")
            if said is not None and str(said) != str(size):
                raise CrateRefused(
                    f"file {path!r}: {size} bytes, the metadata says {said} bytes "
                    "(changed after the crate was made)"
                )
            self.checked[path] = sha

    def path_of(self, entity_id: str) -> str:
        """The relative path in the crate of a data entity's id (percent-decoded)."""
        path = _relative(unquote(entity_id))
        if path is None or "://" in entity_id or path.startswith("#"):
            raise CrateRefused(f"entity {entity_id!r}: not a path inside the crate")
        return path

    def described(self, path: str) -> str:
        """The digest of a file the crate must describe (checked); CrateRefused if it does not."""
        sha = self.checked.get(path)
        if sha is None:
            if (self.root / path).is_file():
                raise CrateRefused(f"file {path!r}: in the crate but not described by its metadata")
            raise CrateRefused(f"file {path!r}: not in the crate")
        return sha

    def workflow(self) -> dict[str, Any]:
        main = _ids(self.root_entity().get("mainEntity"))
        if not main:
            raise CrateRefused("the crate's root names no main entity (the workflow)")
        entity = self.entity(main[0])
        if "ComputationalWorkflow" not in _types(entity):
            raise CrateRefused(f"the main entity {main[0]!r} is no ComputationalWorkflow")
        path = self.path_of(main[0])
        self.described(path)
        try:
            workflow = json.loads((self.root / path).read_bytes(), object_pairs_hook=_no_duplicates)
        except ValueError as exc:
            raise CrateRefused(f"file {path!r}: the workflow is not JSON ({exc})") from None
        if not isinstance(workflow, dict):
            raise CrateRefused(f"file {path!r}: the workflow is not a JSON object")
        return workflow

    def snapshots(self) -> list[CrateSnapshot]:
        datasets: list[tuple[int, str, dict[str, Any]]] = []
        for entity_id, entity in self.graph.items():
            if not entity_id.startswith(SNAPSHOTS) or "Dataset" not in _types(entity):
                continue
            digest = entity_id[len(SNAPSHOTS) :].rstrip("/")
            position = entity.get("position", len(datasets))
            if not isinstance(position, int):
                position = int(str(position)) if str(position).isdigit() else len(datasets)
            datasets.append((position, digest, entity))
        return [self.snapshot(d, e) for _, d, e in sorted(datasets, key=lambda x: x[0])]

    def snapshot(self, digest: str, entity: dict[str, Any]) -> CrateSnapshot:
        folder = f"{SNAPSHOTS}{digest}/"
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise CrateRefused(f"dataset {folder!r}: not a snapshot's digest")
        manifest_path = f"{folder}{MANIFEST}"
        self.described(manifest_path)
        try:
            manifest = json.loads((self.root / manifest_path).read_bytes())
            entries = [(str(p), str(s), bool(x)) for p, s, x in manifest]
        except (ValueError, TypeError) as exc:
            raise CrateRefused(f"file {manifest_path!r}: not a snapshot manifest ({exc})") from None
        files = []
        for path, sha, executable in entries:
            rel = _relative(path)
            if rel is None:
                raise CrateRefused(f"file {manifest_path!r}: {path!r} is no path in a snapshot")
            if self.described(f"{folder}{rel}") != sha:
                raise CrateRefused(
                    f"file {folder + rel!r}: its SHA-256 is not the one its snapshot's manifest "
                    "gives"
                )
            files.append(CrateFile(rel, self.root / folder / rel, sha, executable))
        listed = {f"{folder}{f.path}" for f in files} | {manifest_path}
        extra = sorted(p for p in self.checked if p.startswith(folder) and p not in listed)
        if extra:
            raise CrateRefused(f"file {extra[0]!r}: in a snapshot's folder, not in its manifest")
        canonical = [[f.path, f.sha256, f.executable] for f in sorted(files, key=lambda f: f.path)]
        actual = hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode()).hexdigest()
        if actual != digest:
            raise CrateRefused(
                f"snapshot {digest}: its files make the snapshot {actual} (its manifest was "
                "changed after the crate was made)"
            )
        version = str(entity.get("version", ""))
        dirty = version.endswith(" (dirty)")
        name = str(entity.get("name", ""))
        return CrateSnapshot(
            digest=digest,
            name="" if name == f"snapshot {digest[:12]}" else name,
            git_remote=str(entity.get("codeRepository", "")),
            git_commit=version.removesuffix(" (dirty)"),
            git_dirty=dirty if version else None,
            files=files,
        )

    def environment(self, snapshots: list[CrateSnapshot]) -> bytes | None:
        """The constraints the model was resolved under (None: it has a lock, or no project);
        the environment's project and lock must be the model snapshot's own."""
        model = {f.path: f for f in snapshots[0].files} if snapshots else {}
        for name in ("pyproject.toml", "uv.lock"):
            path = f"{ENVIRONMENT}{name}"
            if path not in self.checked:
                continue
            own = model.get(name)
            if own is None or own.sha256 != self.checked[path]:
                raise CrateRefused(
                    f"file {path!r}: not the model snapshot's {name} (the environment would not "
                    "be the one the run used)"
                )
        path = f"{ENVIRONMENT}{CONSTRAINTS}"
        if path not in self.checked:
            return None
        return (self.root / path).read_bytes()

    def tools(self) -> dict[str, CrateTool]:
        found = {}
        for entity_id, entity in self.graph.items():
            if not entity_id.startswith("#type/"):
                continue
            name = entity_id.removeprefix("#type/")
            package = self.entity(next(iter(_ids(entity.get("isPartOf"))), ""))
            found[name] = CrateTool(
                type=name,
                package=str(package.get("name", "")),
                version=str(entity.get("softwareVersion", "")),
            )
        return found


def read_crate(root: Path) -> CrateRun:
    """The run a crate directory records, every file checked against its metadata.

    Raises CrateUnreadable (no metadata, or not JSON-LD) or CrateRefused (the crate is no run
    crate, a file is missing or differs, a snapshot is not the one named), naming what.
    """
    crate = _Crate(root)
    crate.check_profiles()
    crate.check_files()
    workflow = crate.workflow()
    snapshots = crate.snapshots()
    constraints = crate.environment(snapshots)
    identifier = str(crate.root_entity().get("identifier", "")) or str(
        crate.root_entity().get("name", "")
    )
    outputs = {
        path: sha
        for path, sha in crate.checked.items()
        if path.startswith("tasks/") and "/out/" in path
    }
    return CrateRun(
        identifier=identifier or "an unnamed crate",
        metadata_sha256=crate.metadata_sha256,
        workflow=workflow,
        snapshots=snapshots,
        constraints=constraints,
        tools=crate.tools(),
        outputs=outputs,
    )
