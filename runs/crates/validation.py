"""Validating a crate with `roc-validator`, offline, against every profile it declares.

The validator resolves a crate's JSON-LD context over HTTP through a cache of its own
(`requests-cache`, SQLite) and, offline, serves only what that cache holds. These machines
reach no such host, so the cache is filled here, in a fresh directory for each validation,
from documents that ship inside installed packages: the RO-Crate 1.1 context is
`rocrate/data/ro-crate.jsonld`. The filling goes through a session whose transport serves those
files and refuses every other address, so nothing is ever fetched; the validator then runs
with `offline=True`, so a document missing from the cache fails the validation instead of
reaching for the network. No check is skipped: a check the validator skipped makes the verdict
invalid, as an issue does.
"""

from __future__ import annotations

import importlib.resources
import io
import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runs.crates.profiles import KNOWN, RO_CRATE_CONTEXT, RO_CRATE_PROFILE

METADATA_FILE = "ro-crate-metadata.json"


class CrateUnreadable(ValueError):
    """A directory that holds no readable RO-Crate metadata file; the message says why."""


@dataclass(frozen=True)
class Issue:
    check: str
    severity: str
    message: str
    entity: str = ""


@dataclass(frozen=True)
class ProfileVerdict:
    """The validator's answer for one profile at the REQUIRED level."""

    profile: str  # the validator's identifier, e.g. `workflow-run-crate-0.5`
    uri: str
    issues: list[Issue] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unknown: bool = False  # declared, but no profile of the validator's

    @property
    def valid(self) -> bool:
        return not self.unknown and not self.issues and not self.skipped


@dataclass(frozen=True)
class Verdict:
    profiles: list[ProfileVerdict]

    @property
    def valid(self) -> bool:
        return bool(self.profiles) and all(p.valid for p in self.profiles)

    def lines(self) -> list[str]:
        """The verdict as a person reads it: one line per profile, one per issue."""
        out = []
        for p in self.profiles:
            if p.unknown:
                out.append(f"{p.uri}: declared, but no validator profile knows it (not valid)")
                continue
            state = "valid" if p.valid else "NOT valid"
            out.append(f"{p.profile}: {state} at the REQUIRED level ({len(p.issues)} issues)")
            out += [f"  {i.check} [{i.severity}] {i.entity}: {i.message}" for i in p.issues]
            out += [f"  skipped check {name}" for name in p.skipped]
        out.append("valid" if self.valid else "not valid")
        return out


def packaged_documents() -> dict[str, bytes]:
    """The JSON-LD documents a crate may need, by address, from files of installed packages."""
    context = importlib.resources.files("rocrate").joinpath("data/ro-crate.jsonld").read_bytes()
    declared = json.loads(context).get("@id")
    if declared != RO_CRATE_CONTEXT:  # a rocrate that ships another version's context
        raise RuntimeError(f"rocrate ships the context {declared}, not {RO_CRATE_CONTEXT}")
    return {RO_CRATE_CONTEXT: context}


def fill_cache(cache: Path) -> None:
    """Store every packaged document in the validator's HTTP cache at `cache` (no network)."""
    import requests
    import urllib3
    from requests.adapters import BaseAdapter
    from requests_cache import CachedSession

    documents = packaged_documents()

    class Packaged(BaseAdapter):
        """A transport that answers from the packaged documents and refuses everything else."""

        def send(self, request: Any, *args: Any, **kwargs: Any) -> requests.Response:
            body = documents.get(request.url)
            if body is None:
                raise requests.ConnectionError(f"{request.url}: not a packaged document")
            response = requests.Response()
            response.status_code = 200
            response.url = request.url
            response.request = request
            response.raw = urllib3.HTTPResponse(
                body=io.BytesIO(body),
                headers={"Content-Type": "application/ld+json"},
                status=200,
                preload_content=False,
                request_url=request.url,
            )
            response.headers = requests.structures.CaseInsensitiveDict(response.raw.headers)
            response.encoding = "utf-8"
            return response

        def close(self) -> None:
            pass

    # the same cache as the validator makes (SQLite, GET, never expiring offline)
    session = CachedSession(
        cache_name=str(cache),
        backend="sqlite",
        expire_after=-1,
        allowable_methods=("GET",),
        allowable_codes=(200,),
    )
    session.mount("https://", Packaged())
    session.mount("http://", Packaged())
    try:
        for url in documents:
            session.get(url).raise_for_status()
    finally:
        session.close()


def declared_profiles(crate: Path) -> list[str]:
    """The profile addresses the crate's root conforms to; CrateUnreadable without metadata."""
    try:
        data = json.loads((crate / METADATA_FILE).read_bytes())
        graph = {e["@id"]: e for e in data["@graph"] if isinstance(e, dict) and "@id" in e}
        root_id = graph[METADATA_FILE]["about"]["@id"]
        conforms = graph[root_id].get("conformsTo", [])
    except FileNotFoundError:
        raise CrateUnreadable(f"no {METADATA_FILE}: not an RO-Crate") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CrateUnreadable(f"{METADATA_FILE} is no RO-Crate metadata: {exc}") from None
    conforms = conforms if isinstance(conforms, list) else [conforms]
    return [c["@id"] for c in conforms if isinstance(c, dict) and isinstance(c.get("@id"), str)]


def validate_crate(crate: Path) -> Verdict:
    """Validate a crate directory at the REQUIRED level against RO-Crate 1.1 and every profile
    its root declares, offline. CrateUnreadable when it has no readable metadata file."""
    uris = [
        RO_CRATE_PROFILE.uri,
        *(u for u in declared_profiles(crate) if u != RO_CRATE_PROFILE.uri),
    ]
    with tempfile.TemporaryDirectory(prefix="simrun-crate-cache-") as tmp:
        cache = Path(tmp) / "http_cache"
        fill_cache(cache)
        return Verdict([_validate_one(crate, uri, cache) for uri in uris])


def _validate_one(crate: Path, uri: str, cache: Path) -> ProfileVerdict:
    from rocrate_validator import services
    from rocrate_validator.models import Severity, ValidationSettings

    profile = KNOWN.get(uri)
    if profile is None:
        return ProfileVerdict(profile="", uri=uri, unknown=True)
    # the validator logs every step; its verdict is what this returns
    logging.getLogger("rocrate_validator").setLevel(logging.ERROR)
    settings = ValidationSettings(
        rocrate_uri=str(crate),
        profile_identifier=profile.validator_id,
        requirement_severity=Severity.REQUIRED,
        offline=True,
        cache_path=cache,
    )
    result = services.validate(settings)
    issues = [
        Issue(
            check=str(issue.identifier),
            severity=issue.severity.name,
            message=" ".join(str(issue.message or "").split()),
            entity=str(issue.violatingEntity or ""),
        )
        for issue in result.get_issues(Severity.REQUIRED)
    ]
    skipped = sorted(str(check.identifier) for check in result.skipped_checks)
    return ProfileVerdict(profile=profile.validator_id, uri=uri, issues=issues, skipped=skipped)
