"""YAML (and JSON, its subset) composed from libyaml's events while counting: depth, values
after aliases are expanded, string lengths, numbers that overflow, duplicate keys, a second
document. A document past a limit is refused where it crosses it, before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from runs.workflow_limits import (
    BAD_CHARS,
    INT_TAG,
    NUMBER_TAGS,
    TextLimits,
    check_value,
    refuse,
)


@dataclass
class _Open:
    """A collection being composed: its node, where its count started, its depth below."""

    node: yaml.CollectionNode
    anchor: str | None
    start: int
    below: int = 0
    keys: set[tuple[str, str]] = field(default_factory=set)


class Composer:
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
            line = line_of(extra.start_mark)
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
                line=line_of(event.start_mark),
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
                line=line_of(mark),
            )
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, value, event.implicit)
        node = yaml.ScalarNode(tag, value, mark, event.end_mark, style=event.style)
        if tag in NUMBER_TAGS and _may_overflow(tag, value):
            _check_number(self.loader, node)
        # the text has no NUL or lone surrogate (parse_text looked): only an escape in a
        # double-quoted scalar can make one
        if event.style == '"' and BAD_CHARS.search(value):
            raise refuse(
                "a string holds a NUL character or an unpaired surrogate",
                line=line_of(mark),
            )
        self._count(1, mark)
        if event.anchor:
            self.anchors[event.anchor] = (node, 1, 0)
        self._attach(node, 0, mark)

    def _alias(self, event: Any) -> None:
        anchor, mark = event.anchor, event.start_mark
        if anchor not in self.anchors:
            if any(o.anchor == anchor for o in self.stack):
                raise refuse(
                    f"alias *{anchor} refers to a node that contains it", line=line_of(mark)
                )
            raise refuse(f"alias *{anchor} names no anchor before it", line=line_of(mark))
        node, size, depth = self.anchors[anchor]
        if len(self.stack) + depth > self.bounds.max_depth:
            raise refuse(
                f"alias *{anchor} nests deeper than {self.bounds.max_depth} levels "
                "(SIMRUN_WORKFLOW_MAX_DEPTH)",
                line=line_of(mark),
            )
        self._count(size, mark)
        self._attach(node, depth, mark)

    def _count(self, nodes: int, mark: Any) -> None:
        self.count += nodes
        if self.count > self.bounds.max_nodes:
            raise refuse(
                f"more than {self.bounds.max_nodes} values, aliases expanded "
                "(SIMRUN_WORKFLOW_MAX_NODES)",
                line=line_of(mark),
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
                    raise refuse(f"duplicate key {node.value!r} in a mapping", line=line_of(mark))
                parent.keys.add(key)
            value.append((node, None))


def line_of(mark: Any) -> int:
    return mark.line + 1


def _may_overflow(tag: str, value: str) -> bool:
    """Whether a number's text may be past 64 bits or infinite (short ones cannot)."""
    if tag == INT_TAG:
        return len(value) > 15
    lower = value.lower()
    return len(value) > 300 or "e" in lower or "inf" in lower or "nan" in lower


def _check_number(loader: yaml.CSafeLoader, node: yaml.ScalarNode) -> None:
    line = line_of(node.start_mark)
    if len(node.value) > 64:
        raise refuse(f"a number of {len(node.value)} characters is too large", line=line)
    try:
        value = loader.construct_object(node)
    except ValueError:
        raise refuse(f"{node.value!r} is not a number that can be read", line=line) from None
    finally:
        loader.constructed_objects.pop(node, None)
    check_value(value, line=line, text=node.value)
