"""A large workflow's node status as Argo stores it, decoded from plain values (node_status.py).

`status.compressedNodes` is the standard base64 of the gzip of the nodes map's JSON (Argo's
`file.CompressEncodeString`); offloaded nodes (`status.offloadNodeStatusVersion`) are not in
the object at all.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from typing import Any

import pytest

from cluster.argo.node_status import (
    NodesUnreadable,
    decompress_nodes,
    workflow_nodes,
)
from cluster.argo.status import workflow_status
from runs.ports import PodPhase, WorkflowPhase
from tests.cluster.argo.test_status import RUNNING, Nodes, workflow

ARGO_SAMPLE = (
    "H4sIAAAAAAAA/6pWSkosUrKqVspMUbJSUtJRykvMTYWwUjKLC3ISK/3gAiWVBVBWcUliUUlqimOJklVeaU6OjlJa"
    "Zl5mcQZCpFZHKS0/nwbm1gICAAD//8SSRamxAAAA"
)
"""The compressed nodes of Argo's own test of its hydrator (the "Packed" case of
https://github.com/argoproj/argo-workflows/blob/7fe62c8302e42fd69f54bdfee81a93607d7252b0/workflow/hydrator/hydrator_test.go),
written by Go's (p)gzip: two empty nodes, `foo` and `bar`."""
EMPTY_NODE = {
    "id": "",
    "name": "",
    "displayName": "",
    "type": "",
    "startedAt": None,
    "finishedAt": None,
}


def packed(value: Any, **gzip_options: Any) -> str:
    """What Argo writes for `value`: base64 (standard, padded) of gzip of its JSON."""
    # a fixed time in the header: the test ids made of these are the same in every process
    options = {"mtime": 0, **gzip_options}
    return base64.b64encode(gzip.compress(json.dumps(value).encode(), **options)).decode()


def test_a_value_written_by_argo_decodes_to_its_nodes() -> None:
    assert decompress_nodes(ARGO_SAMPLE) == {"foo": EMPTY_NODE, "bar": EMPTY_NODE}


def test_a_value_made_by_python_gzip_and_base64_decodes_to_the_same_nodes() -> None:
    nodes = {"wf-1": {"id": "wf-1", "name": "wf.scan-w0", "phase": "Running"}}
    assert decompress_nodes(packed(nodes, mtime=0)) == nodes
    assert decompress_nodes(packed(nodes, compresslevel=1)) == nodes


def test_concatenated_gzip_members_are_read_as_go_reads_them() -> None:
    text = json.dumps({"a": {"id": "a"}}).encode()
    data = gzip.compress(text[:5]) + gzip.compress(text[5:])
    assert decompress_nodes(base64.b64encode(data).decode()) == {"a": {"id": "a"}}


def test_line_breaks_in_the_base64_are_ignored_as_go_ignores_them() -> None:
    value = packed({"a": {"id": "a"}})
    assert decompress_nodes(value[:10] + "\r\n" + value[10:]) == {"a": {"id": "a"}}


def test_a_value_that_decompresses_past_the_limit_is_refused_before_it_is_all_read() -> None:
    bomb = base64.b64encode(gzip.compress(b" " * (8 * 1024 * 1024))).decode()
    with pytest.raises(NodesUnreadable, match="more than 1048576 bytes"):
        decompress_nodes(bomb, limit_bytes=1024 * 1024)


def test_a_value_at_the_limit_is_read() -> None:
    nodes = {"a": {"id": "a"}}
    size = len(json.dumps(nodes))
    assert decompress_nodes(packed(nodes), limit_bytes=size) == nodes
    with pytest.raises(NodesUnreadable, match="more than"):
        decompress_nodes(packed(nodes), limit_bytes=size - 1)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("not base64!", "not base64"),
        (base64.b64encode(b"\x1f\x8b" + b"junk" * 8).decode(), "not valid gzip"),
        (packed({"a": {}})[:-12], "cut short"),
        (base64.b64encode(gzip.compress(b"{}", mtime=0) + b"trailing").decode(), "bytes after"),
        (base64.b64encode(b"\x28\xb5\x2f\xfd" + b"\0" * 8).decode(), "zstd"),
        (base64.b64encode(b"\x8b\x02\x80{}\x03").decode(), "not gzip"),
        (packed([1, 2]), "no map of nodes"),
        (packed({"a": "b"}), "no map of nodes"),
        (base64.b64encode(gzip.compress(b"{not json", mtime=0)).decode(), "no JSON"),
        (base64.b64encode(gzip.compress(b"\xff\xfe\xfa", mtime=0)).decode(), "no JSON"),
        (base64.b64encode(zlib.compress(b"{}")).decode(), "not gzip"),
    ],
)
def test_a_corrupt_value_is_refused_with_what_is_wrong(value: str, why: str) -> None:
    with pytest.raises(NodesUnreadable, match=why):
        decompress_nodes(value)


def test_the_nodes_are_read_from_compressed_nodes_only_when_status_nodes_is_empty() -> None:
    """As Argo's `DecompressWorkflow`: plain nodes win over a compressed value."""
    plain = {"a": {"id": "a"}}
    other = packed({"b": {"id": "b"}})
    assert workflow_nodes({"status": {"nodes": plain, "compressedNodes": other}}) == plain
    assert workflow_nodes({"status": {"compressedNodes": other}}) == {"b": {"id": "b"}}
    assert workflow_nodes({"status": {"nodes": {}, "compressedNodes": other}}) == {"b": {"id": "b"}}
    assert workflow_nodes({"status": {}}) == {}
    assert workflow_nodes({}) == {}


def test_offloaded_nodes_say_what_to_set() -> None:
    found = {"status": {"offloadNodeStatusVersion": "fnv:123", "phase": "Running"}}
    with pytest.raises(NodesUnreadable) as raised:
        workflow_nodes(found)
    assert "Argo offloaded this workflow's node status" in str(raised.value)
    assert "status.offloadNodeStatusVersion" in str(raised.value)
    assert "SIMRUN_ARGO_SERVER_URL" in str(raised.value)


def test_the_status_of_a_compressed_workflow_is_the_status_of_its_plain_twin() -> None:
    """B13: B1: a workflow past Argo's size limit reads as it did before Argo compressed it."""
    nodes = Nodes()
    nodes.pod("scan-w0", [RUNNING])
    nodes.pod("scan-w1", [{"phase": "Failed", "exit": 137, "message": "x"}, {}])
    plain = workflow(nodes)
    compressed = workflow(Nodes())
    compressed["status"] = {"phase": "Running", "compressedNodes": packed(nodes.nodes)}

    assert workflow_status(compressed) == workflow_status(plain)
    assert workflow_status(compressed).pods["scan-w0"].phase is PodPhase.RUNNING


def test_a_workflow_whose_nodes_cannot_be_read_gives_an_unreadable_status() -> None:
    """B13: a corrupt value or offloaded nodes: no pods (not failed, not waiting), and why."""
    corrupt = workflow(Nodes())
    corrupt["status"] = {"phase": "Running", "compressedNodes": "AAAA"}
    offloaded = workflow(Nodes())
    offloaded["status"] = {"phase": "Succeeded", "offloadNodeStatusVersion": "fnv:1"}

    for found, why in ((corrupt, "not gzip"), (offloaded, "offloaded")):
        status = workflow_status(found)
        assert status.pods == {} and status.failures == {}
        assert why in status.unreadable
    assert workflow_status(offloaded).phase is WorkflowPhase.SUCCEEDED
    assert workflow_status(workflow(Nodes())).unreadable == ""
