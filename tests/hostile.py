"""Hostile workflow documents, one per class, with what their refusal must say.

Shared by the tests of every surface (the reader, the CLI, the API, the submit page), so each
class is tried the same way everywhere. The sizes assume the default limits.
"""

from __future__ import annotations

from dataclasses import dataclass

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
