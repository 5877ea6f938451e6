"""The workflow reader's limits: every hostile class refused with its limit and line, and
generated nested and aliased documents either read exactly or refused, never expanded past
the limits."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_django import Settings

from runs.validation import load_data
from runs.workflow import WorkflowInvalid
from runs.workflow_limits import TextLimits, WorkflowRefused, check_data
from runs.workflow_text import decode, parse_text
from tests.hostile import HOSTILE, layered, render

SMALL = TextLimits(max_bytes=64 * 1024, max_depth=10, max_nodes=300, max_string=200)
GEN = TextLimits(max_bytes=64 * 1024, max_depth=20, max_nodes=300, max_string=200)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_class_is_refused_naming_its_limit_and_line(name: str) -> None:
    hostile = HOSTILE[name]
    with pytest.raises(WorkflowRefused) as refused:
        parse_text(decode(hostile.text, bounds=TextLimits()), bounds=TextLimits())
    (error,) = refused.value.errors
    assert hostile.says in str(error)
    assert error.line == hostile.line


def test_an_alias_bomb_is_refused_at_the_alias_that_passes_the_limit() -> None:
    """387 million values from 538 bytes: an alias counts as the values it stands for, so the
    refusal comes at the first line whose aliases pass the limit, whatever the limit."""
    text = HOSTILE["alias_bomb"].text.decode()
    assert len(text) < 600
    for max_nodes, line in ((20_000, 9), (1_000_000, 11), (10_000_000, 12)):
        with pytest.raises(WorkflowRefused, match=f"more than {max_nodes} values") as refused:
            parse_text(text, bounds=TextLimits(max_nodes=max_nodes))
        assert refused.value.errors[0].line == line


def test_aliases_and_merge_keys_within_the_limits_are_read() -> None:
    data, _ = parse_text("base: &b {x: 1}\none: *b\ntwo:\n  <<: *b\n  y: 2\n", bounds=SMALL)
    assert data == {"base": {"x": 1}, "one": {"x": 1}, "two": {"x": 1, "y": 2}}


def test_a_merge_key_may_be_overridden_but_a_key_not_repeated() -> None:
    data, _ = parse_text("b: &b {x: 1}\nc:\n  <<: *b\n  x: 2\n", bounds=SMALL)
    assert data["c"] == {"x": 2}
    with pytest.raises(WorkflowRefused, match="duplicate key 'x'"):
        parse_text("c:\n  x: 1\n  y: 0\n  x: 2\n", bounds=SMALL)


def test_keys_that_differ_in_type_are_not_duplicates() -> None:
    data, _ = parse_text('m: {1: a, "1": b}\n', bounds=SMALL)
    assert data == {"m": {1: "a", "1": "b"}}


def test_a_second_document_is_refused() -> None:
    with pytest.raises(WorkflowRefused, match="one document") as refused:
        parse_text("name: a\n---\nname: b\n", bounds=SMALL)
    assert refused.value.errors[0].line == 2


def test_numbers_within_64_bits_and_finite_floats_are_read() -> None:
    data, _ = parse_text("a: 9223372036854775807\nb: -1.5e+300\nc: 0x7fffffffffffffff\n")
    assert data == {"a": 2**63 - 1, "b": -1.5e300, "c": 2**63 - 1}
    with pytest.raises(WorkflowRefused, match="not finite"):
        parse_text("a: .inf\n")
    with pytest.raises(WorkflowRefused, match="64 bits"):
        parse_text("a: 0x8000000000000000\n")


def test_a_syntax_error_is_invalid_but_not_refused() -> None:
    with pytest.raises(WorkflowInvalid) as invalid:
        parse_text("name: x\ntasks: [\n", bounds=SMALL)
    assert not isinstance(invalid.value, WorkflowRefused)
    assert invalid.value.errors[0].line == 3


def test_the_limits_come_from_the_settings(settings: Settings) -> None:
    settings.SIMRUN_WORKFLOW_MAX_DEPTH = 5
    with pytest.raises(WorkflowRefused, match=r"deeper than 5 levels"):
        parse_text("a: [[[[[1]]]]]\n")
    settings.SIMRUN_WORKFLOW_MAX_BYTES = 10
    with pytest.raises(WorkflowRefused, match=r"larger than 10 bytes"):
        decode(b"name: twelve")


def test_an_object_gets_the_same_limits() -> None:
    """A workflow that arrives already parsed (a JSON body) is checked value by value."""
    deep: Any = 1
    for _ in range(100):
        deep = [deep]
    shared = ["x"] * 100
    cases = {
        "SIMRUN_WORKFLOW_MAX_DEPTH": {"name": "d", "deep": deep},
        "SIMRUN_WORKFLOW_MAX_NODES": {"name": "n", "wide": [shared] * 1000},
        "SIMRUN_WORKFLOW_MAX_STRING": {"name": "x" * 70_000},
        "NUL": {"name": "a\x00b"},
        "64 bits": {"name": "i", "n": 2**64},
        "not finite": {"name": "f", "n": float("inf")},
    }
    for says, data in cases.items():
        with pytest.raises(WorkflowRefused, match=says):
            load_data(data)


# --- generated documents ---------------------------------------------------------------------


@given(layered())
@settings(max_examples=300, deadline=None)
def test_generated_documents_are_read_exactly_or_refused_at_a_limit(layers: list[Any]) -> None:
    """Bounded work, checked by counting: a document whose values, aliases expanded, stay
    within the limits reads as exactly its data; any other is refused naming the limit it
    passed, so nothing past max_nodes values or max_depth levels is ever built."""
    doc = render(layers)
    if doc.nodes <= GEN.max_nodes and doc.depth <= GEN.max_depth:
        data, _ = parse_text(doc.text, bounds=GEN)
        assert data == doc.data
        return
    with pytest.raises(WorkflowRefused) as refused:
        parse_text(doc.text, bounds=GEN)
    message = str(refused.value)
    if doc.depth > GEN.max_depth and doc.nodes <= GEN.max_nodes:
        assert "SIMRUN_WORKFLOW_MAX_DEPTH" in message
    if doc.nodes > GEN.max_nodes and doc.depth <= GEN.max_depth:
        assert "SIMRUN_WORKFLOW_MAX_NODES" in message


YAMLISH = st.text(st.sampled_from(list("[]{}:,-&*!|>'\"#%@`?\n\t ab01.eE+\\x\x00\x85\ufeff")))


@given(st.one_of(YAMLISH, st.text(max_size=200)))
@settings(max_examples=400, deadline=None)
def test_any_text_is_read_or_refused_with_a_workflow_error(text: str) -> None:
    """Never another exception (which the surfaces would show as a traceback or a 500)."""
    try:
        parse_text(text, bounds=SMALL)
    except WorkflowInvalid as exc:
        assert exc.errors and all(str(e) for e in exc.errors)


@given(st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_any_bytes_decode_or_are_refused(raw: bytes) -> None:
    try:
        parse_text(decode(raw, bounds=SMALL), bounds=SMALL)
    except WorkflowInvalid as exc:
        assert exc.errors


@given(
    st.recursive(
        st.one_of(st.integers(), st.floats(), st.text(max_size=300), st.none()),
        lambda inner: st.one_of(
            st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=5), inner, max_size=5)
        ),
        max_leaves=400,
    )
)
@settings(max_examples=200, deadline=None)
def test_any_object_passes_or_is_refused(data: Any) -> None:
    try:
        check_data(data, bounds=SMALL)
    except WorkflowRefused as exc:
        assert exc.errors
