"""The node's HTTP listener over real loopback HTTP: /metrics in the
Prometheus text format, 404 elsewhere, 405 for other methods, the API token
(401 without it, compared whatever the scheme's case), TLS with the node's
certificate, and a port in use refused naming the config key."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from cortex.errors import ConfigError
from cortex.http import HttpListener, server_tls_context
from cortex.http.server import MAX_CONCURRENT_REQUESTS
from tests.cluster import wait_until
from tests.metrics_scrape import Scrape, request
from tests.tls import write_tls_files

TOKEN = "metrics-token-1234"


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("cortex_probe", "A probe.", ["kind"], registry=registry).labels("x").inc(3)
    return registry


@pytest.fixture
def listen(registry: CollectorRegistry) -> Iterator[Callable[..., HttpListener]]:
    started: list[HttpListener] = []

    def make(**options: object) -> HttpListener:
        listener = HttpListener("127.0.0.1:0", registry, **options)  # type: ignore[arg-type]
        listener.start()
        started.append(listener)
        return listener

    yield make
    for listener in started:
        listener.stop()


def test_metrics_are_served_in_the_prometheus_text_format(
    listen: Callable[..., HttpListener],
) -> None:
    listener = listen()
    answer = request(f"http://{listener.address}/metrics")
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    scraped = Scrape.parse(answer.body.decode())
    assert scraped.type_of("cortex_probe_total") == "counter"
    assert scraped.value("cortex_probe_total", kind="x") == 3
    # A query string does not change the path; HEAD answers without a body.
    assert request(f"http://{listener.address}/metrics?x=1").status == 200
    head = request(f"http://{listener.address}/metrics", method="HEAD")
    assert head.status == 200 and head.body == b""
    assert int(head.headers["Content-Length"]) == len(answer.body)


def test_unknown_paths_are_404_and_other_methods_405(listen: Callable[..., HttpListener]) -> None:
    listener = listen()
    for path in ("/", "/metric", "/metrics/", "/api"):
        assert request(f"http://{listener.address}{path}").status == 404, path
    assert request(f"http://{listener.address}/nope", method="POST").status == 404
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        refused = request(f"http://{listener.address}/metrics", method=method)
        assert refused.status == 405, method
        assert refused.headers["Allow"] == "GET, HEAD"


def test_with_a_token_every_request_needs_it(listen: Callable[..., HttpListener]) -> None:
    listener = listen(api_token=TOKEN)
    url = f"http://{listener.address}/metrics"
    for token in (None, "wrong-token", TOKEN[:-1], TOKEN + "x"):
        refused = request(url, token)
        assert refused.status == 401, token
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert TOKEN.encode() not in refused.body
    # Without the token even an unknown path says 401, not what exists.
    assert request(f"http://{listener.address}/nope").status == 401
    assert request(url, TOKEN).status == 200
    # The scheme in any case (RFC 7235), as some clients send it.
    sent = socket.create_connection(("127.0.0.1", listener.port), timeout=10)
    with sent:
        sent.sendall(f"GET /metrics HTTP/1.0\r\nAuthorization: bearer {TOKEN}\r\n\r\n".encode())
        status_line = sent.makefile("rb").readline()
    assert status_line.split()[1] == b"200", status_line


def test_tls_with_the_node_certificate(listen: Callable[..., HttpListener], tmp_path: Path) -> None:
    files = write_tls_files(tmp_path / "certs")
    listener = listen(tls=server_tls_context(str(files.cert), str(files.key), None))
    assert listener.scheme == "https"
    trusting = ssl.create_default_context(cafile=str(files.ca))
    scraped = request(f"https://{listener.address}/metrics", context=trusting)
    assert scraped.status == 200 and b"cortex_probe_total" in scraped.body
    # Plain HTTP gets no metrics, and the listener carries on afterwards.
    with pytest.raises(OSError):
        request(f"http://{listener.address}/metrics")
    assert request(f"https://{listener.address}/metrics", context=trusting).status == 200


def test_mutual_tls_requires_a_client_certificate(
    listen: Callable[..., HttpListener], tmp_path: Path
) -> None:
    files = write_tls_files(tmp_path / "certs")
    ca_pem = files.ca.read_bytes()
    listener = listen(tls=server_tls_context(str(files.cert), str(files.key), ca_pem))
    url = f"https://{listener.address}/metrics"
    anonymous = ssl.create_default_context(cafile=str(files.ca))
    with pytest.raises(OSError):
        request(url, context=anonymous)
    presenting = ssl.create_default_context(cafile=str(files.ca))
    presenting.load_cert_chain(str(files.cert), str(files.key))
    assert request(url, context=presenting).status == 200


def test_connections_beyond_the_limit_are_closed_at_once(
    listen: Callable[..., HttpListener],
) -> None:
    listener = listen()
    # Connections that never send a request, each holding a thread.
    silent = [
        socket.create_connection(("127.0.0.1", listener.port), timeout=10)
        for _ in range(MAX_CONCURRENT_REQUESTS)
    ]
    try:
        with pytest.raises(OSError):  # closed without an answer, not kept waiting
            request(f"http://{listener.address}/metrics", timeout_s=5)
    finally:
        for connection in silent:
            connection.close()

    def answered() -> bool:
        try:
            return request(f"http://{listener.address}/metrics").status == 200
        except OSError:  # a slot not yet given back
            return False

    wait_until(answered, 10, what="the threads of closed connections to be free again")


def test_a_port_in_use_is_a_config_error_naming_the_key(registry: CollectorRegistry) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(ConfigError) as refused:
            HttpListener(address, registry)
    assert str(refused.value).startswith(f"config key http: cannot listen on {address}: ")
    assert "in use" in str(refused.value)


def test_stop_closes_the_port(registry: CollectorRegistry) -> None:
    listener = HttpListener("127.0.0.1:0", registry)
    listener.start()
    port = listener.port
    assert request(f"http://127.0.0.1:{port}/metrics").status == 200
    listener.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    # Stopping one that never started closes its port too.
    HttpListener("127.0.0.1:0", registry).stop()
