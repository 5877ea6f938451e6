"""Names and values the cluster accepts: label values, Argo task names, quantities, the
content type of a merge patch.

The run store and the controller name pods `<task>`, `<task>-w<i>` and `<task>-merge` with the
workflow's task ids, which may hold `_`; Argo's template and DAG task names may not
(`[a-zA-Z0-9][-a-zA-Z0-9]*`), and a label value has its own rules. Each function here makes a
valid name of a free one, unchanged when it already is one, else with a short hash so two
different inputs never meet.
"""

from __future__ import annotations

import hashlib
import math
import re

LABEL_MAX = 63
ARGO_NAME_MAX = 128
HASH_CHARS = 8
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_ARGO_NAME = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]*$")
MEBI_PER_GIBI = 1024
MERGE_PATCH = "application/merge-patch+json"
STRICT = "Strict"
"""`fieldValidation` of every create, replace and patch: the API server refuses an unknown
field (a typo, a field of another version) instead of dropping it with a warning (its default,
`Warn`), so a mistake fails where it is made, on a real cluster as on the simulator."""
MILLI = 1000


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def label_value(text: str) -> str:
    """M5: `text` as a label value: itself when valid, else cleaned and ending in its hash."""
    if len(text) <= LABEL_MAX and _LABEL_VALUE.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
    stem = cleaned[: LABEL_MAX - HASH_CHARS - 1].strip("-_.")
    return f"{stem}-{_digest(text)}" if stem else _digest(text)


def argo_name(text: str) -> str:
    """`text` as an Argo template or DAG task name: itself when valid, else cleaned + hash."""
    if len(text) <= ARGO_NAME_MAX - 16 and _ARGO_NAME.match(text):
        return text
    cleaned = re.sub(r"[^a-zA-Z0-9-]+", "-", text).strip("-")[: ARGO_NAME_MAX - 32]
    return f"{cleaned}-{_digest(text)}" if cleaned else f"t-{_digest(text)}"


def cpu_quantity(cores: float) -> str:
    """Cores as a quantity: whole cores plainly (`2`), else millicores (`1500m`)."""
    milli = round(cores * MILLI)
    return str(milli // MILLI) if milli % MILLI == 0 else f"{milli}m"


def memory_quantity(gb: float) -> str:
    """GiB as a quantity: whole GiB as `Gi`, else whole MiB (the planner's 1/32 GiB steps)."""
    mebi = math.ceil(gb * MEBI_PER_GIBI - 1e-6)
    return f"{mebi // MEBI_PER_GIBI}Gi" if mebi % MEBI_PER_GIBI == 0 else f"{mebi}Mi"


def number_text(value: float) -> str:
    """A number for an environment variable: `2`, `0.5`."""
    return f"{value:g}"
