"""Hostile workflow documents, one per class, with what their refusal must say.

Shared by the tests of every surface (the reader, the CLI, the API, the submit page), so each
class is tried the same way everywhere. The sizes assume the default limits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

HEAD = "name: hostile\ntasks:\n  - {id: a, type: sleep}\n"


def alias_bomb(levels: int = 9, fan: int = 9) -> str:
    """A few hundred bytes that expand to fan**levels values (387 million for 9 and 9)."""
    lines = [HEAD.rstrip("\n"), "bomb:", "  a0: &a0 [" + ", ".join(["x"] * fan) + "]"]
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def deep_yaml(levels: int = 500) -> str:
    """Block sequences nested `levels` deep, one a line."""
    return HEAD + "deep:\n" + "".join("  " * (i + 1) + "-\n" for i in range(levels))


def deep_json(levels: int = 100_000) -> str:
    """A JSON document of objects nested `levels` deep, on one line."""
    return '{"name": "hostile", "deep": ' + '{"a": ' * levels + "1" + "}" * levels + "}"


@dataclass(frozen=True)
class Hostile:
    """A document and what its refusal names: a phrase and the line (None: no line)."""

    text: bytes
    says: str
    line: int | None


HOSTILE: dict[str, Hostile] = {
    "alias_bomb": Hostile(alias_bomb().encode(), "SIMRUN_WORKFLOW_MAX_NODES", 9),
    "deep_yaml": Hostile(deep_yaml().encode(), "SIMRUN_WORKFLOW_MAX_DEPTH", 68),
    "deep_json": Hostile(deep_json().encode(), "SIMRUN_WORKFLOW_MAX_DEPTH", 1),
    "oversized": Hostile(
        (HEAD + "# padding\n" * 120_000).encode(), "SIMRUN_WORKFLOW_MAX_BYTES", 104_857
    ),
    "not_utf8": Hostile(HEAD.encode() + b"description: caf\xe9\n", "not UTF-8", 4),
    "nul": Hostile(HEAD.encode() + b"description: a\x00b\n", "NUL", 4),
    "nul_escaped": Hostile(HEAD.encode() + b'description: "a\\0b"\n', "NUL", 4),
    "duplicate_key": Hostile((HEAD + "name: again\n").encode(), "duplicate key 'name'", 4),
    "huge_integer": Hostile(
        (HEAD + "  - {id: b, type: sleep, settings: {units: " + "9" * 5000 + "}}\n").encode(),
        "too large",
        4,
    ),
    "int_over_64_bits": Hostile(
        (HEAD + "  - {id: b, type: sleep, settings: {units: 9223372036854775808}}\n").encode(),
        "64 bits",
        4,
    ),
    "float_overflow": Hostile(
        (HEAD + "  - {id: b, type: sleep, settings: {seconds: 1.0e+999}}\n").encode(),
        "not finite",
        4,
    ),
    "long_string": Hostile(
        (HEAD + "description: " + "x" * 70_000 + "\n").encode(), "SIMRUN_WORKFLOW_MAX_STRING", 4
    ),
    "recursive_alias": Hostile((HEAD + "loop: &l [*l]\n").encode(), "contains it", 4),
}


# --- generated documents: nested and aliased, with their expanded size ---------------------

ALIAS = object()


@st.composite
def layered(draw: st.DrawFn) -> list[Any]:
    """Layers of values; a layer's value may alias any earlier layer (fan-out compounds)."""
    leaf = st.one_of(st.just(ALIAS), st.integers(-5, 5), st.text("abc", max_size=4))
    value = st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5),
            st.dictionaries(st.text("kqz", min_size=1, max_size=3), inner, max_size=4),
        ),
        max_leaves=30,
    )
    layers = []
    for index in range(draw(st.integers(1, 8))):
        # extra nesting around the layer's value, now and then past the depth limit
        wrap = draw(st.sampled_from([0, 0, 0, 1, 2, 5, 8, 9, 12]))
        layers.append((draw(value), wrap, draw(st.lists(st.integers(0, max(index - 1, 0))))))
    return layers


@dataclass
class Rendered:
    text: str
    data: dict[str, Any]
    nodes: int  # values once every alias is expanded, keys included
    depth: int  # collections nested in each other
    anchors: dict[str, tuple[Any, int, int]] = field(default_factory=dict)


def render(layers: list[Any]) -> Rendered:
    """The YAML of the layers, the data it must read as, and its expanded size and depth."""
    out = Rendered("name: gen\n", {"name": "gen"}, nodes=3, depth=1)
    for index, (value, wrap, picks) in enumerate(layers):
        text, data, nodes, depth = _walk(value, out.anchors, index, iter(picks))
        if value is ALIAS and wrap == 0:
            wrap = 1  # an alias cannot carry an anchor of its own
        text, data = "[" * wrap + text + "]" * wrap, _wrapped(data, wrap)
        nodes, depth = nodes + wrap, depth + wrap
        out.anchors[f"a{index}"] = (data, nodes, depth)
        out.text += f"a{index}: &a{index} {text}\n"
        out.data[f"a{index}"] = data
        out.nodes += 1 + nodes
        out.depth = max(out.depth, 1 + depth)
    return out


def _walk(v: Any, anchors: dict, index: int, targets: Iterator[int]) -> tuple[str, Any, int, int]:
    """A value's YAML, data, values when expanded, collections nested."""
    if v is ALIAS:
        if index == 0:
            return "null", None, 1, 0
        name = f"a{next(targets, 0) % index}"
        data, nodes, depth = anchors[name]
        return f"*{name}", data, nodes, depth
    if isinstance(v, list):
        parts = [_walk(x, anchors, index, targets) for x in v]
        text = "[" + ", ".join(p[0] for p in parts) + "]"
        nodes = 1 + sum(p[2] for p in parts)
        return text, [p[1] for p in parts], nodes, 1 + max((p[3] for p in parts), default=0)
    if isinstance(v, dict):
        pairs = [(json.dumps(k), _walk(x, anchors, index, targets)) for k, x in v.items()]
        text = "{" + ", ".join(f"{k}: {p[0]}" for k, p in pairs) + "}"
        data = {json.loads(k): p[1] for k, p in pairs}
        nodes = 1 + sum(1 + p[2] for _, p in pairs)
        return text, data, nodes, 1 + max((p[3] for _, p in pairs), default=0)
    return json.dumps(v), v, 1, 0


def _wrapped(data: Any, times: int) -> Any:
    for _ in range(times):
        data = [data]
    return data
