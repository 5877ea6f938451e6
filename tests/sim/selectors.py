"""Label and field selectors of list and watch requests.

Label selectors take the syntax of `k8s.io/apimachinery/pkg/labels` (`a=b`, `a==b`, `a!=b`,
`a in (x,y)`, `a notin (x,y)`, `a`, `!a`, joined by commas). Field selectors take `=`, `==`
and `!=` on the field labels the resource declares; any other field is refused with 400
`field label not supported`, as the real server does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.sim.resources import ResourceInfo
from tests.sim.status import bad_request

Matcher = Callable[[dict[str, Any]], bool]

_SET_OP = re.compile(r"^\s*(!?)([\w./-]+)\s+(in|notin)\s*\((.*)\)\s*$")
_EQ_OP = re.compile(r"^\s*([\w./-]+)\s*(==|!=|=)\s*([\w./-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)([\w./-]+)\s*$")


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a set of labels satisfies this term."""
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


def _split_terms(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t for t in terms if t.strip()]


def parse_labels(text: str | None) -> list[Requirement]:
    """A label selector string as requirements; 400 for one that does not parse."""
    requirements = []
    for term in _split_terms(text or ""):
        if match := _SET_OP.match(term):
            negated, key, op, values = match.groups()
            if negated:
                raise bad_request(f"unable to parse requirement: {term.strip()}")
            items = tuple(v.strip() for v in values.split(",") if v.strip())
            requirements.append(Requirement(key, op, items))
        elif match := _EQ_OP.match(term):
            key, op, value = match.groups()
            requirements.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
        elif match := _EXISTS.match(term):
            negated, key = match.groups()
            requirements.append(Requirement(key, "!exists" if negated else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: {term.strip()}")
    return requirements


def label_matcher(text: str | None) -> Matcher:
    """A predicate on objects for a label selector string."""
    requirements = parse_labels(text)

    def matches(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return matches


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The value of a dotted field path, as the field selector compares it ("" if absent)."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_matcher(text: str | None, info: ResourceInfo) -> Matcher:
    """A predicate on objects for a field selector string of a resource."""
    allowed = {"metadata.name", "metadata.namespace", *info.field_labels}
    terms: list[tuple[str, bool, str]] = []
    for term in _split_terms(text or ""):
        match = re.match(r"^\s*([\w.]+)\s*(==|!=|=)\s*(.*?)\s*$", term)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        path, op, value = match.groups()
        if path not in allowed:
            raise bad_request(f"field label not supported: {path}")
        terms.append((path, op != "!=", value))

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) == equal for path, equal, value in terms)

    return matches


def matches_node_selector(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """Whether a node's labels satisfy a pod's `nodeSelector`."""
    return all(labels.get(key) == value for key, value in (selector or {}).items())
