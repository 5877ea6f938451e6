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

Objects that arrive already parsed (a JSON body of the API) get the same checks on their
values by `check_data`.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runs.workflow import Lines, WorkflowError, WorkflowInvalid

INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
INT_MAX = 2**63 - 1
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
_FLOAT_MAX = 1.7976931348623157e308
_NUMBER_TAGS = (INT_TAG, FLOAT_TAG)


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
    bad = _BAD_CHARS.search(text)
    if bad:
        what = "a NUL character" if bad.group() == "\x00" else "an unpaired surrogate"
        raise refuse(f"the text holds {what}", line=text.count("\n", 0, bad.start()) + 1)
    loader = yaml.CSafeLoader(text)
    try:
        node = _Composer(loader, bounds).document()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        if exc.problem and "maximum nesting depth" in exc.problem:  # libyaml's cap, met first
            raise refuse(
                f"nested deeper than {bounds.max_depth} levels (SIMRUN_WORKFLOW_MAX_DEPTH)",
                line=_line(mark) if mark is not None else None,
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


@dataclass
class _Open:
    """A collection being composed: its node, where its count started, its depth below."""

    node: yaml.CollectionNode
    anchor: str | None
    start: int
    below: int = 0
    keys: set[tuple[str, str]] = field(default_factory=set)


class _Composer:
    """Nodes from libyaml's events, counting as it goes (aliases at their expanded size).

    PyYAML's own composer is recursive and counts nothing; this one keeps an explicit stack,
    so depth is a number it checks rather than the interpreter's recursion limit."""

    def __init__(self, loader: yaml.CSafeLoader, bounds: TextLimits) -> None:
        self.loader = loader
        self.bounds = bounds
        self.count = 0
        self.stack: list[_Open] = []
        # anchor -> (node, values when expanded, collections nested in it, itself included)
        self.anchors: dict[str, tuple[yaml.Node, int, int]] = {}
        self.root: yaml.Node | None = None

    def document(self) -> yaml.Node | None:
        """The single document's root node, or None for an empty stream."""
        get: Any = self.loader.get_event  # events of libyaml (untyped)
        get()  # StreamStart
        if isinstance(get(), yaml.StreamEndEvent):
            return None
        scalar, alias, end = yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionEndEvent
        while True:
            event = get()
            kind = type(event)
            if kind is scalar:
                self._scalar(event)
            elif kind is yaml.DocumentEndEvent:
                break
            elif issubclass(kind, end):
                self._end(event)
            elif kind is alias:
                self._alias(event)
            else:
                self._start(event)
        extra = get()
        if not isinstance(extra, yaml.StreamEndEvent):
            line = _line(extra.start_mark)
            raise refuse("a workflow is one document; a second one starts here", line=line)
        return self.root

    def _end(self, event: Any) -> None:
        done = self.stack.pop()
        done.node.end_mark = event.end_mark
        depth = done.below + 1
        if done.anchor:
            self.anchors[done.anchor] = (done.node, self.count - done.start, depth)
        self._attach(done.node, depth, event.start_mark)

    def _start(self, event: Any) -> None:
        if len(self.stack) >= self.bounds.max_depth:
            raise refuse(
                f"nested deeper than {self.bounds.max_depth} levels (SIMRUN_WORKFLOW_MAX_DEPTH)",
                line=_line(event.start_mark),
            )
        kind: type[yaml.CollectionNode]
        kind = yaml.SequenceNode if isinstance(event, yaml.SequenceStartEvent) else yaml.MappingNode
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(kind, None, event.implicit)
        node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
        self.stack.append(_Open(node, event.anchor, self.count))
        self._count(1, event.start_mark)

    def _scalar(self, event: Any) -> None:
        value = event.value
        mark = event.start_mark
        if len(value) > self.bounds.max_string:
            raise refuse(
                f"a string of {len(value)} characters; at most {self.bounds.max_string} "
                "(SIMRUN_WORKFLOW_MAX_STRING)",
                line=_line(mark),
            )
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, value, event.implicit)
        node = yaml.ScalarNode(tag, value, mark, event.end_mark, style=event.style)
        if tag in _NUMBER_TAGS and _may_overflow(tag, value):
            _check_number(self.loader, node)
        # the text has no NUL or lone surrogate (parse_text looked): only an escape in a
        # double-quoted scalar can make one
        if event.style == '"' and _BAD_CHARS.search(value):
            raise refuse(
                "a string holds a NUL character or an unpaired surrogate",
                line=_line(mark),
            )
        self._count(1, mark)
        if event.anchor:
            self.anchors[event.anchor] = (node, 1, 0)
        self._attach(node, 0, mark)

    def _alias(self, event: Any) -> None:
        anchor, mark = event.anchor, event.start_mark
        if anchor not in self.anchors:
            if any(o.anchor == anchor for o in self.stack):
                raise refuse(f"alias *{anchor} refers to a node that contains it", line=_line(mark))
            raise refuse(f"alias *{anchor} names no anchor before it", line=_line(mark))
        node, size, depth = self.anchors[anchor]
        if len(self.stack) + depth > self.bounds.max_depth:
            raise refuse(
                f"alias *{anchor} nests deeper than {self.bounds.max_depth} levels "
                "(SIMRUN_WORKFLOW_MAX_DEPTH)",
                line=_line(mark),
            )
        self._count(size, mark)
        self._attach(node, depth, mark)

    def _count(self, nodes: int, mark: Any) -> None:
        self.count += nodes
        if self.count > self.bounds.max_nodes:
            raise refuse(
                f"more than {self.bounds.max_nodes} values, aliases expanded "
                "(SIMRUN_WORKFLOW_MAX_NODES)",
                line=_line(mark),
            )

    def _attach(self, node: yaml.Node, depth: int, mark: Any) -> None:
        if not self.stack:
            self.root = node
            return
        parent = self.stack[-1]
        if depth > parent.below:
            parent.below = depth
        value = parent.node.value
        if type(parent.node) is yaml.SequenceNode:
            value.append(node)
        elif value and value[-1][1] is None:
            value[-1] = (value[-1][0], node)
        else:
            if isinstance(node, yaml.ScalarNode) and node.value != "<<":
                key = (node.tag, node.value)
                if key in parent.keys:
                    raise refuse(f"duplicate key {node.value!r} in a mapping", line=_line(mark))
                parent.keys.add(key)
            value.append((node, None))


def _line(mark: Any) -> int:
    return mark.line + 1


def _may_overflow(tag: str, value: str) -> bool:
    """Whether a number's text may be past 64 bits or infinite (short ones cannot)."""
    if tag == INT_TAG:
        return len(value) > 15
    lower = value.lower()
    return len(value) > 300 or "e" in lower or "inf" in lower or "nan" in lower


def _check_number(loader: yaml.CSafeLoader, node: yaml.ScalarNode) -> None:
    line = _line(node.start_mark)
    if len(node.value) > 64:
        raise refuse(f"a number of {len(node.value)} characters is too large", line=line)
    try:
        value = loader.construct_object(node)
    except ValueError:
        raise refuse(f"{node.value!r} is not a number that can be read", line=line) from None
    finally:
        loader.constructed_objects.pop(node, None)
    _check_value(value, line=line, text=node.value)


def _check_value(value: Any, *, line: int | None = None, loc: str = "", text: str = "") -> None:
    if isinstance(value, bool):
        return
    shown = text or repr(value)
    if isinstance(value, int) and abs(value) > INT_MAX:
        raise refuse(
            f"the integer {shown} is too large (at most ±{INT_MAX}, 64 bits)", line=line, loc=loc
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse(
            f"the number {shown} is not finite (at most ±{_FLOAT_MAX:.6g})", line=line, loc=loc
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
            _check_value(value, loc=loc)


def _check_string(value: str, bounds: TextLimits, loc: str) -> None:
    if len(value) > bounds.max_string:
        raise refuse(
            f"a string of {len(value)} characters; at most {bounds.max_string} "
            "(SIMRUN_WORKFLOW_MAX_STRING)",
            loc=loc,
        )
    if _BAD_CHARS.search(value):
        raise refuse("a string holds a NUL character or an unpaired surrogate", loc=loc)
