"""What a failure message tells the user to change (a plain function of plain values)."""

from __future__ import annotations

import math

MEMORY_STEP_GB = 0.25


def memory_cause(
    *,
    unit: str | None,
    value: object,
    peak_gb: float | None,
    limit_gb: float | None,
    per_worker_gb: float | None,
) -> str:
    """What a user can change after a second kill for memory: the unit running at the kill,
    what its process had reached (a floor: it was killed while it grew), the pod's limit, and
    the setting to raise with a value that would have room: twice the peak (or twice the
    memory per worker when nothing was measured), up to the next quarter GB."""
    parts = []
    if unit is not None:
        parts.append(f"unit {unit}" + (f" (value {value!r})" if value is not None else ""))
    if peak_gb is not None:
        parts.append(f"had reached {peak_gb:.2f} GB in its process when killed")
    elif unit is not None:
        parts.append("was running when the pod was killed")
    if limit_gb is not None:
        per = f", {per_worker_gb:g} GB per worker" if per_worker_gb is not None else ""
        if parts:
            parts.append(f"with the pod's limit at {limit_gb:.2f} GB{per}")
        else:
            parts.append(f"the pod was killed at its limit of {limit_gb:.2f} GB{per}")
    base = next((gb for gb in (peak_gb, per_worker_gb, limit_gb) if gb is not None), None)
    if base is None:
        return " ".join(parts)
    want = max(MEMORY_STEP_GB, math.ceil(2 * base / MEMORY_STEP_GB) * MEMORY_STEP_GB)
    if per_worker_gb is not None:
        want = max(want, math.ceil(2 * per_worker_gb / MEMORY_STEP_GB) * MEMORY_STEP_GB)
    advice = (
        f"give its units more memory: in the workflow, the task's resources: "
        f"{{memory_per_worker_gb: {want:g}}}"
    )
    return f"{' '.join(parts)}; {advice}" if parts else advice
