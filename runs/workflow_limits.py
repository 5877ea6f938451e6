"""The limits of a workflow document and the checks of its values, for the reader of its text
(`runs/workflow_text.py`, `runs/workflow_yaml.py`) and for an object that arrives parsed (a
JSON body of the API: `check_data`). Each limit names the setting that raises it."""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from runs.workflow import WorkflowError, WorkflowInvalid

INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
INT_MAX = 2**63 - 1
BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
FLOAT_MAX = 1.7976931348623157e308
NUMBER_TAGS = (INT_TAG, FLOAT_TAG)


class WorkflowRefused(WorkflowInvalid):
    """A workflow text that cannot be read within the limits (too large, too deep, not UTF-8…).

    Unlike an invalid workflow it is a bad request everywhere: the API answers 400."""


@dataclass(frozen=True)
class TextLimits:
    """The caps on a workflow document; each names the setting that raises it."""

    max_bytes: int = 1024 * 1024
    max_depth: int = 64
    max_nodes: int = 20_000
    max_string: int = 65_536


def limits() -> TextLimits:
    """The limits of this service's settings; where Django is not set up (`simrun validate`,
    which must start fast), the same variables read from the environment, else the defaults."""
    conf = sys.modules.get("django.conf")  # never import Django only to read four numbers
    if conf is None or not conf.settings.configured:
        return _limits_from_environment()
    settings = conf.settings
    return TextLimits(
        max_bytes=settings.SIMRUN_WORKFLOW_MAX_BYTES,
        max_depth=settings.SIMRUN_WORKFLOW_MAX_DEPTH,
        max_nodes=settings.SIMRUN_WORKFLOW_MAX_NODES,
        max_string=settings.SIMRUN_WORKFLOW_MAX_STRING,
    )


def _limits_from_environment() -> TextLimits:
    defaults = TextLimits()

    def read(name: str, default: int) -> int:
        value = os.environ.get(name, "")
        return int(value) if value.strip().isdigit() and int(value) > 0 else default

    return TextLimits(
        max_bytes=read("SIMRUN_WORKFLOW_MAX_BYTES", defaults.max_bytes),
        max_depth=read("SIMRUN_WORKFLOW_MAX_DEPTH", defaults.max_depth),
        max_nodes=read("SIMRUN_WORKFLOW_MAX_NODES", defaults.max_nodes),
        max_string=read("SIMRUN_WORKFLOW_MAX_STRING", defaults.max_string),
    )


def refuse(message: str, *, line: int | None = None, loc: str = "") -> WorkflowRefused:
    return WorkflowRefused([WorkflowError(loc, message, line=line)])


def check_value(value: Any, *, line: int | None = None, loc: str = "", text: str = "") -> None:
    if isinstance(value, bool):
        return
    shown = text or repr(value)
    if isinstance(value, int) and abs(value) > INT_MAX:
        raise refuse(
            f"the integer {shown} is too large (at most ±{INT_MAX}, 64 bits)", line=line, loc=loc
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse(
            f"the number {shown} is not finite (at most ±{FLOAT_MAX:.6g})", line=line, loc=loc
        )


def check_data(data: Any, *, bounds: TextLimits | None = None) -> None:
    """The same limits on a workflow that arrived as an object (a JSON body of the API).

    Walks it without recursion, counting every value; a shared object counts each time."""
    bounds = bounds or limits()
    count = 0
    pending: list[tuple[Any, int, str]] = [(data, 1, "")]
    while pending:
        value, depth, loc = pending.pop()
        count += 1
        if count > bounds.max_nodes:
            raise refuse(f"more than {bounds.max_nodes} values (SIMRUN_WORKFLOW_MAX_NODES)")
        if isinstance(value, dict | list) and depth > bounds.max_depth:
            raise refuse(
                f"nested deeper than {bounds.max_depth} levels (SIMRUN_WORKFLOW_MAX_DEPTH)",
                loc=loc,
            )
        if isinstance(value, dict):
            for key, item in value.items():
                _check_string(str(key), bounds, loc)
                pending.append((item, depth + 1, f"{loc}.{key}" if loc else str(key)))
        elif isinstance(value, list):
            pending.extend((item, depth + 1, f"{loc}[{i}]") for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_string(value, bounds, loc)
        else:
            check_value(value, loc=loc)


def _check_string(value: str, bounds: TextLimits, loc: str) -> None:
    if len(value) > bounds.max_string:
        raise refuse(
            f"a string of {len(value)} characters; at most {bounds.max_string} "
            "(SIMRUN_WORKFLOW_MAX_STRING)",
            loc=loc,
        )
    if BAD_CHARS.search(value):
        raise refuse("a string holds a NUL character or an unpaired surrogate", loc=loc)
