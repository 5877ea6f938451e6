"""The Argo server over HTTPS, as Argo serves it by default (`--secure`, its own certificate).

simrun reads offloaded nodes through the Argo server (`cluster/argo/argo_server.py`): it must
trust the certificate given as SIMRUN_ARGO_SERVER_CA_FILE, refuse one it cannot verify with a
message that says so, and skip the check only when SIMRUN_ARGO_SERVER_INSECURE says to.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from cluster.argo.argo_server import hydrated_workflow
from cluster.argo.config import ClusterConfig
from cluster.argo.node_status import NodesUnreadable
from tests.sim.argo.packing import NodeStatusPacker
from tests.sim.argo.server import ArgoServer
from tests.sim.clock import SimClock
from tests.sim.resources import WORKFLOWS
from tests.sim.store import Store

NAMESPACE = "simrun"
WORKFLOW = "simrun-r1"
NODES = {"simrun-r1": {"id": "simrun-r1", "name": "simrun-r1", "type": "DAG"}}


@dataclass(frozen=True)
class Secure:
    """An Argo server on HTTPS, the CA that signed its certificate, and a token file."""

    server: ArgoServer
    ca_file: Path
    token_file: Path

    def config(self, **changes: str | bool) -> ClusterConfig:
        base = ClusterConfig(
            namespace=NAMESPACE,
            argo_server_url=self.server.url,
            argo_server_token_file=str(self.token_file),
        )
        return base if not changes else ClusterConfig(**{**base.__dict__, **changes})


@pytest.fixture
def secure(tmp_path: Path) -> Iterator[Secure]:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    store = Store(SimClock())
    store.create(
        WORKFLOWS,
        NAMESPACE,
        {"metadata": {"name": WORKFLOW}, "spec": {}, "status": {"nodes": NODES}},
    )
    server = ArgoServer(store, NodeStatusPacker(), tls=context).start()
    ca_file = tmp_path / "argo-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    token_file = tmp_path / "argo-token"
    token_file.write_text(server.token)
    try:
        yield Secure(server, ca_file, token_file)
    finally:
        server.stop()


def test_the_argo_server_is_read_over_https_with_the_given_ca(secure: Secure) -> None:
    """B13: with SIMRUN_ARGO_SERVER_CA_FILE naming the CA of the server's certificate, the
    hydrated workflow is read over HTTPS."""
    assert secure.server.url.startswith("https://")

    found = hydrated_workflow(
        secure.config(argo_server_ca_file=str(secure.ca_file)), NAMESPACE, WORKFLOW
    )

    assert found["status"]["nodes"] == NODES


def test_a_certificate_that_cannot_be_verified_is_refused_and_said(secure: Secure) -> None:
    """B13: without the CA (the system's CAs do not know Argo's own certificate) the request
    is refused, naming the server and the failed verification, and nothing is read."""
    with pytest.raises(
        NodesUnreadable, match=r"the Argo server \(https://.*CERTIFICATE_VERIFY_FAILED"
    ):
        hydrated_workflow(secure.config(), NAMESPACE, WORKFLOW)
    assert secure.server.requests == []


def test_insecure_skips_the_check_when_the_operator_says_so(secure: Secure) -> None:
    """B13: SIMRUN_ARGO_SERVER_INSECURE (Argo's self-signed default, the operator's choice)
    reads the server without verifying its certificate."""
    found = hydrated_workflow(secure.config(argo_server_insecure=True), NAMESPACE, WORKFLOW)

    assert found["metadata"]["name"] == WORKFLOW
    assert len(secure.server.requests) == 1


def test_a_ca_file_that_cannot_be_read_is_said(secure: Secure, tmp_path: Path) -> None:
    """B13: a CA file that is missing or not a certificate is a NodesUnreadable naming the
    file and why (not "cannot be reached"), and no request is made."""
    missing = tmp_path / "no-such-ca.pem"
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")

    for path, why in ((missing, "No such file"), (garbage, "")):
        with pytest.raises(
            NodesUnreadable, match=rf"^the Argo server's CA file \({path}\) cannot be read: .*{why}"
        ):
            hydrated_workflow(secure.config(argo_server_ca_file=str(path)), NAMESPACE, WORKFLOW)
    assert secure.server.requests == []
