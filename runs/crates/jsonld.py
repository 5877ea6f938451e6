"""The small pieces of JSON-LD every part of a crate's metadata uses: references, times,
action statuses, the type of a setting's value, a file's properties."""

from __future__ import annotations

import mimetypes
from datetime import datetime
from typing import Any

from runs.crates.record import Written
from runs.states import RunState, TaskState

FORMAL_PARAMETER = "https://bioschemas.org/profiles/FormalParameter/1.0-RELEASE"
COMPLETED, FAILED = (
    "http://schema.org/CompletedActionStatus",
    "http://schema.org/FailedActionStatus",
)
ACTIVE = "http://schema.org/ActiveActionStatus"
UNITS = {  # QUDT units of the resource figures; counts are dimensionless
    "peak_memory_gb": "https://qudt.org/vocab/unit/GigaBYTE",
    "unit_seconds_median": "https://qudt.org/vocab/unit/SEC",
}


def ref(entity_id: str) -> dict[str, str]:
    return {"@id": entity_id}


def iso_time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def status(state: str) -> str:
    if state in (RunState.SUCCEEDED, TaskState.DONE):
        return COMPLETED
    if state in (RunState.FAILED, RunState.CANCELLED, TaskState.FAILED, TaskState.SKIPPED):
        return FAILED
    return ACTIVE


def value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, int):
        return "Integer"
    if isinstance(value, float):
        return "Float"
    if isinstance(value, str):
        return "Text"
    return "PropertyValue"  # a list or a mapping: structured, its value as JSON


def file_properties(path: str, written: Written, extra: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {
        "@type": "File",
        "name": path.rsplit("/", 1)[-1],
        "contentSize": str(written.size),
        "sha256": written.sha256,
        "encodingFormat": mimetypes.guess_type(path)[0] or "application/octet-stream",
    }
    props.update(extra)
    return props
