"""M1: a task's pods are named in one place, `runs/plans.py` (`worker_pod`, `merge_pod`,
`worker_index`, `task_pods`); the service and both backends call it rather than spelling
`<task>-w<i>` or `<task>-merge` themselves, so a change of the names is a change of one file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLACES = ["runs", "cluster"]
NAMES = ROOT / "runs" / "plans.py"
# an f-string's placeholder followed by a pod's suffix: f"{task}-w0", f"{t}-w{i}", f"{t}-merge"
# (an Argo template's name, f"{base}-worker", is no pod's)
SPELLED = re.compile(r"\{[^{}]*\}-(?:w(?:\d|\{|[\"'])|merge\b)")


def spelled_pod_names(roots: list[Path]) -> list[str]:
    """`file:line` of every pod name spelled outside `runs/plans.py`."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if path == NAMES or "migrations" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if SPELLED.search(code) and ('f"' in code or "f'" in code):
                    found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_pod_names_are_spelled_only_in_the_plans() -> None:
    assert spelled_pod_names([ROOT / p for p in PLACES]) == []


def test_a_pod_name_spelled_elsewhere_is_found(tmp_path: Path) -> None:
    """The scan finds what it looks for: a check that finds nothing would prove nothing."""
    module = tmp_path / "somewhere.py"
    module.write_text('def coordinator(task_id):\n    return f"{task_id}-w0"  # spelled\n')
    assert len(spelled_pod_names([tmp_path])) == 1
