"""Channels over real TLS against in-process gRPC servers on 127.0.0.1: a
client that fits the server's TLS gets through, and every kind of mismatch
becomes an error that names TLS or the certificate as the cause."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from cortex.api.client import CortexClient
from cortex.api.tls import ClientTls, ServerTls, client_tls
from cortex.errors import TlsError, Unavailable
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.tls import TlsFiles, write_tls_files


class _StatusOnly(pb_grpc.CortexServiceServicer):  # type: ignore[misc]
    """Answers GetClusterStatus and nothing else: enough to show a call got
    through the handshake."""

    def GetClusterStatus(self, request: pb.GetClusterStatusRequest, context: object) -> object:
        return pb.GetClusterStatusResponse(leader_id="reached")


def _serve(tls: ServerTls | None) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_CortexServiceServicer_to_server(_StatusOnly(), server)
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", tls.credentials())
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def files(tmp_path: Path) -> TlsFiles:
    return write_tls_files(tmp_path / "certs")


@pytest.fixture
def tls_node(files: TlsFiles) -> Iterator[str]:
    server, address = _serve(ServerTls(files.cert.read_bytes(), files.key.read_bytes()))
    yield address
    server.stop(None)


@pytest.fixture
def mtls_node(files: TlsFiles) -> Iterator[str]:
    tls = ServerTls(files.cert.read_bytes(), files.key.read_bytes(), files.ca.read_bytes())
    server, address = _serve(tls)
    yield address
    server.stop(None)


def _status(address: str, tls: ClientTls | None) -> str:
    with CortexClient(address, timeout_s=10, token="", tls=tls or False) as client:
        return client.get_cluster_status().leader_id


def test_a_client_trusting_the_ca_gets_through(tls_node: str, files: TlsFiles) -> None:
    assert _status(tls_node, client_tls(str(files.ca))) == "reached"
    # The certificate names localhost too, and the override is what is checked.
    port = tls_node.rpartition(":")[2]
    assert _status(f"localhost:{port}", client_tls(str(files.ca))) == "reached"
    assert _status(tls_node, client_tls(str(files.ca), server_name="localhost")) == "reached"


def test_a_plaintext_client_is_told_the_node_may_serve_tls(tls_node: str) -> None:
    with pytest.raises(Unavailable, match="serving TLS .* --tls-ca or set CORTEX_TLS_CA"):
        _status(tls_node, None)
    with CortexClient(tls_node, timeout_s=10, token="", tls=False) as client:
        with pytest.raises(Unavailable, match="serving TLS"):
            list(client.stream_task_output("t1", timeout_s=10))


def test_a_client_trusting_another_ca_is_told_the_certificate_is_not_trusted(
    tls_node: str, tmp_path: Path
) -> None:
    other = write_tls_files(tmp_path / "other")
    with pytest.raises(TlsError, match=f"not trusted by the CA in {other.ca} .*issuer"):
        _status(tls_node, client_tls(str(other.ca)))


def test_a_certificate_that_does_not_name_the_host_is_named(tls_node: str, files: TlsFiles) -> None:
    with pytest.raises(TlsError, match="does not name node7.example; set CORTEX_TLS_SERVER_NAME"):
        _status(tls_node, client_tls(str(files.ca), server_name="node7.example"))


def test_a_tls_client_of_a_plaintext_node_is_told_it_does_not_serve_tls(files: TlsFiles) -> None:
    server, address = _serve(None)
    try:
        with pytest.raises(TlsError, match=f"node at {address} does not serve TLS"):
            _status(address, client_tls(str(files.ca)))
    finally:
        server.stop(None)


def test_mutual_tls_needs_a_client_certificate_the_ca_signed(
    mtls_node: str, files: TlsFiles, tmp_path: Path
) -> None:
    with pytest.raises(TlsError, match="requires client certificates, set CORTEX_TLS_CERT"):
        _status(mtls_node, client_tls(str(files.ca)))
    stranger = write_tls_files(tmp_path / "stranger")
    foreign = client_tls(str(files.ca), cert=str(stranger.cert), key=str(stranger.key))
    with pytest.raises(TlsError, match="may not accept this client's certificate"):
        _status(mtls_node, foreign)
    mine = client_tls(str(files.ca), cert=str(files.cert), key=str(files.key))
    assert _status(mtls_node, mine) == "reached"
