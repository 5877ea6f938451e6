"""Workflow text read within limits: the one reader of YAML and JSON for every surface.

The CLI (`simrun validate`, `simrun submit`), the API (validate, runs, estimate) and the submit
page all come through here (via `runs.validation`), so a hostile document is refused the same
way everywhere, cheaply and with the line where it crossed a limit:

- the text's size in bytes, its encoding (UTF-8, no NUL character);
- nesting depth and the number of nodes *after* expanding aliases, counted while the events
  stream out of libyaml, before anything is built (a 400-byte alias bomb is refused after
  reading a few hundred events, not after expanding to billions);
- strings longer than a limit, integers beyond 64 bits, floats that overflow (or .inf/.nan),
  duplicate keys in a mapping, a second document in the stream.

The limits and the checks of values are `runs/workflow_limits.py` (objects that arrive already
parsed, a JSON body of the API, get the same checks by its `check_data`); the counting composer
of YAML is `runs/workflow_yaml.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from runs.workflow import Lines, WorkflowError, WorkflowInvalid
from runs.workflow_limits import BAD_CHARS, TextLimits, limits, refuse
from runs.workflow_yaml import Composer, line_of


def decode(raw: bytes, *, bounds: TextLimits | None = None) -> str:
    """The text of a workflow file's bytes: UTF-8 without NUL, within the size limit."""
    bounds = bounds or limits()
    _check_size(len(raw), raw.count(b"\n", 0, bounds.max_bytes) + 1, bounds)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise refuse(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
            "(save the file as UTF-8)",
            line=line,
        ) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise refuse("the text holds a NUL character", line=text.count("\n", 0, nul) + 1)
    return text


def read_file(path: Path, *, bounds: TextLimits | None = None) -> str:
    """A workflow file's text, reading no more than one byte past the size limit."""
    bounds = bounds or limits()
    with path.open("rb") as handle:
        raw = handle.read(bounds.max_bytes + 1)
    return decode(raw, bounds=bounds)


def _check_size(size: int, line: int, bounds: TextLimits) -> None:
    if size > bounds.max_bytes:
        raise refuse(
            f"the workflow is larger than {bounds.max_bytes} bytes "
            "(SIMRUN_WORKFLOW_MAX_BYTES); it passes the limit here",
            line=line,
        )


def parse_text(text: str, *, bounds: TextLimits | None = None) -> tuple[Any, Lines]:
    """Parse YAML or JSON text within the limits into data and the lines of its locations.

    Raises WorkflowRefused past a limit, WorkflowInvalid for a syntax error (with its line)."""
    bounds = bounds or limits()
    text = str(text)  # libyaml takes only an exact str (DRF marks form input with a subclass)
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > bounds.max_bytes:
        cut = text.encode("utf-8", errors="surrogatepass")[: bounds.max_bytes]
        _check_size(size, cut.count(b"\n") + 1, bounds)
    bad = BAD_CHARS.search(text)
    if bad:
        what = "a NUL character" if bad.group() == "\x00" else "an unpaired surrogate"
        raise refuse(f"the text holds {what}", line=text.count("\n", 0, bad.start()) + 1)
    loader = yaml.CSafeLoader(text)
    try:
        node = Composer(loader, bounds).document()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        if exc.problem and "maximum nesting depth" in exc.problem:  # libyaml's cap, met first
            raise refuse(
                f"nested deeper than {bounds.max_depth} levels (SIMRUN_WORKFLOW_MAX_DEPTH)",
                line=line_of(mark) if mark is not None else None,
            ) from None
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or str(exc)
        error = WorkflowError("", f"not valid YAML or JSON: {problem}", line=line)
        raise WorkflowInvalid([error]) from None
    except yaml.YAMLError as exc:
        raise WorkflowInvalid([WorkflowError("", f"not valid YAML or JSON: {exc}")]) from None
    finally:
        loader.dispose()
    return data, Lines(node)
