"""What a simrun crate declares it follows, and the terms it adds to RO-Crate 1.1's context.

RO-Crate 1.1 is the version the Workflow Run Crate profiles 0.5 are written on. The terms of
the workflow-run namespace a crate uses (`sha256`, `resourceUsage`), and RO-Crate 1.2's
`localPath` in a crate made metadata only, are defined in the crate's own context, as RO-
Crate's rules for extending it allow, instead of by the namespace's remote context: a crate
then needs only the RO-Crate 1.1 context, which ships with `rocrate`, to be read offline.
"""

from __future__ import annotations

from dataclasses import dataclass

CRATE_VERSION = "1.1"
RO_CRATE = "https://w3id.org/ro/crate/1.1"
RO_CRATE_CONTEXT = f"{RO_CRATE}/context"
WORKFLOW_RUN_TERMS = "https://w3id.org/ro/terms/workflow-run#"
EXTRA_TERMS = {
    "sha256": f"{WORKFLOW_RUN_TERMS}sha256",
    "resourceUsage": f"{WORKFLOW_RUN_TERMS}resourceUsage",
}
LOCAL_PATH_TERM = {"localPath": "https://w3id.org/ro/terms#localPath"}
"""Where a file the crate does not hold would be (a metadata-only crate): RO-Crate 1.2's term,
defined here as its context defines it."""


@dataclass(frozen=True)
class Profile:
    """A profile a crate conforms to: its permalink, name, version and the validator's name."""

    uri: str
    name: str
    version: str
    validator_id: str


PROCESS_RUN = Profile(
    "https://w3id.org/ro/wfrun/process/0.5", "Process Run Crate", "0.5", "process-run-crate-0.5"
)
WORKFLOW_RUN = Profile(
    "https://w3id.org/ro/wfrun/workflow/0.5", "Workflow Run Crate", "0.5", "workflow-run-crate-0.5"
)
PROVENANCE_RUN = Profile(
    "https://w3id.org/ro/wfrun/provenance/0.5",
    "Provenance Run Crate",
    "0.5",
    "provenance-run-crate-0.5",
)
WORKFLOW_RO_CRATE = Profile(
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0",
    "Workflow RO-Crate",
    "1.0",
    "workflow-ro-crate-1.0",
)
RO_CRATE_PROFILE = Profile(RO_CRATE, "RO-Crate", CRATE_VERSION, "ro-crate-1.1")

DECLARED = (PROCESS_RUN, WORKFLOW_RUN, PROVENANCE_RUN, WORKFLOW_RO_CRATE)
"""What the root of a simrun crate conforms to (the metadata file: RO-Crate 1.1 and Workflow
RO-Crate, as the Workflow Run Crate profiles ask)."""
KNOWN = {p.uri: p for p in (*DECLARED, RO_CRATE_PROFILE)}
RUN_PROFILES = {PROCESS_RUN.uri, WORKFLOW_RUN.uri, PROVENANCE_RUN.uri}
"""A crate simrun can re-run declares one of these at least."""
