"""`cortex mcp --http` setup checks and the HTTP app they configure: where the
bearer token comes from, which listen addresses are refused, which Host and
Origin headers are accepted, all without binding a port (the app is driven
in-process, as if it listened on an address other machines reach)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from cortex.errors import ConfigError
from cortex.mcp import build_server, http_app, http_listener
from cortex.mcp.http import StaticTokenVerifier, resolve_token
from tests.tls import TlsFiles, write_tls_files

TOKEN = "mcp-token-0123456789abcdef"
API_TOKEN = "api-token-0123456789abcdef"
ENV = {"CORTEX_MCP_TOKEN": TOKEN}
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "test", "version": "1"}},
}  # fmt: skip
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_token_sources_in_order_of_precedence(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text(f"  {'f' * 20}\n")
    both_envs = {"CORTEX_MCP_TOKEN": TOKEN, "CORTEX_API_TOKEN": API_TOKEN}
    assert resolve_token("t" * 20, None, both_envs) == ("t" * 20, "--http-token")
    assert resolve_token(None, str(token_file), both_envs) == (
        "f" * 20,
        f"--http-token-file {token_file}",
    )
    assert resolve_token(None, None, both_envs) == (TOKEN, "$CORTEX_MCP_TOKEN")
    value, source = resolve_token(None, None, {"CORTEX_API_TOKEN": API_TOKEN})
    assert value == API_TOKEN and "$CORTEX_API_TOKEN" in source


@pytest.mark.parametrize(
    ("token", "content", "env", "message"),
    [
        (None, None, {}, "needs a bearer token: set $CORTEX_MCP_TOKEN, or pass --http-token-file"),
        (None, None, {"CORTEX_MCP_TOKEN": "   "}, "needs a bearer token"),
        ("short", None, {}, "--http-token: an MCP bearer token needs at least 16 characters"),
        (None, None, {"CORTEX_API_TOKEN": "has spaces in it, sixteen+"}, "printable ASCII"),
        (None, "", {}, "is empty"),
        ("t" * 20, "f" * 20, {}, "not both"),
    ],
)
def test_missing_or_unfit_tokens_are_refused(
    tmp_path: Path, token: str | None, content: str | None, env: dict[str, str], message: str
):
    token_file = None
    if content is not None:
        (tmp_path / "token").write_text(content)
        token_file = str(tmp_path / "token")
    with pytest.raises(ConfigError, match=message.replace("$", r"\$").replace("+", r"\+")):
        resolve_token(token, token_file, env)


def test_an_unreadable_token_file_is_named(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"--http-token-file: cannot read .*missing"):
        resolve_token(None, str(tmp_path / "missing"), {})


def test_the_verifier_accepts_only_the_token_and_keeps_it_out_of_reprs():
    verifier = StaticTokenVerifier(TOKEN)

    async def verify(token: str) -> Any:
        return await verifier.verify_token(token)

    accepted = anyio.run(verify, TOKEN)
    assert accepted is not None and TOKEN not in repr(accepted)
    for wrong in ("", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), "é" * 20):
        assert anyio.run(verify, wrong) is None


def test_loopback_accepts_its_own_address_and_localhost_forms():
    listener = http_listener("127.0.0.1:8765", environ=ENV)
    assert listener.url == "http://127.0.0.1:8765/mcp"
    assert listener.allowed_hosts == ("127.0.0.1:8765", "localhost:8765", "[::1]:8765")
    assert "http://localhost:8765" in listener.allowed_origins
    assert TOKEN not in repr(listener)
    ipv6 = http_listener("[::1]:8765", environ=ENV)
    assert ipv6.host == "::1" and ipv6.url == "http://[::1]:8765/mcp"


@pytest.mark.parametrize("address", ["0.0.0.0:8765", "10.0.0.5:8765", "[::]:8765", "myhost:8765"])
def test_a_reachable_address_needs_tls_or_an_explicit_opt_out(address: str):
    with pytest.raises(ConfigError, match="--http-tls-cert PEM and --http-tls-key PEM, or pass --insecure-http"):  # fmt: skip
        http_listener(address, environ=ENV)
    with pytest.raises(ConfigError, match="needs a bearer token"):
        http_listener(address, environ={})


def test_a_wildcard_address_needs_a_host_name_to_check():
    with pytest.raises(ConfigError, match="--allowed-host HOST"):
        http_listener("0.0.0.0:8765", insecure_http=True, environ=ENV)
    listener = http_listener(
        "0.0.0.0:8765", insecure_http=True, allowed_hosts=["mcp.example.test"], environ=ENV
    )
    assert "0.0.0.0:8765" not in listener.allowed_hosts
    assert {"mcp.example.test:8765", "mcp.example.test", "127.0.0.1:8765"} <= set(
        listener.allowed_hosts
    )


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return write_tls_files(tmp_path, hosts=["mcp.example.test", "10.0.0.5", "*.example.test"])


def test_tls_files_are_checked_and_their_names_allowed(tls: TlsFiles, tmp_path: Path):
    with pytest.raises(ConfigError, match="--http-tls-cert needs --http-tls-key"):
        http_listener("10.0.0.5:8443", tls_cert=str(tls.cert), environ=ENV)
    other = write_tls_files(tmp_path / "other", name="other")
    with pytest.raises(ConfigError, match="does not belong to the certificate"):
        http_listener("10.0.0.5:8443", tls_cert=str(tls.cert), tls_key=str(other.key), environ=ENV)
    listener = http_listener(
        "0.0.0.0:8443", tls_cert=str(tls.cert), tls_key=str(tls.key), environ=ENV
    )
    assert listener.url == "https://0.0.0.0:8443/mcp"
    assert {"mcp.example.test:8443", "10.0.0.5:8443"} <= set(listener.allowed_hosts)
    assert not any("*" in host for host in listener.allowed_hosts)
    assert "https://mcp.example.test:8443" in listener.allowed_origins


@pytest.mark.parametrize(
    ("value", "hosts"),
    [
        ("agents.example.test", ["agents.example.test:8765", "agents.example.test"]),
        ("agents.example.test:443", ["agents.example.test:443"]),
        ("agents.example.test:*", ["agents.example.test:*"]),
        ("[fd00::1]", ["[fd00::1]:8765", "[fd00::1]"]),
        ("fd00::1", ["[fd00::1]:8765", "[fd00::1]"]),
        ("[fd00::1]:9000", ["[fd00::1]:9000"]),
    ],
)
def test_allowed_host_forms(value: str, hosts: list[str]):
    listener = http_listener("127.0.0.1:8765", allowed_hosts=[value], environ=ENV)
    assert listener.allowed_hosts[3:] == tuple(hosts)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("allowed_hosts", "https://agents.example.test"),
        ("allowed_hosts", "agents.example.test:http"),
        ("allowed_hosts", "[fd00::1"),
        ("allowed_origins", "agents.example.test"),
        ("allowed_origins", "https://agents.example.test/path"),
    ],
)
def test_bad_allowed_values_are_named(flag: str, value: str):
    name = "--allowed-host" if flag == "allowed_hosts" else "--allowed-origin"
    with pytest.raises(ConfigError, match=name):
        http_listener("127.0.0.1:8765", environ=ENV, **{flag: [value]})  # type: ignore[arg-type]


@pytest.fixture
def remote_app(tls: TlsFiles) -> Iterator[TestClient]:
    """The app `cortex mcp --http 10.0.0.5:8443` with TLS serves, driven in
    process (its node is never called: initialize does not reach it)."""
    listener = http_listener(
        "10.0.0.5:8443",
        tls_cert=str(tls.cert),
        tls_key=str(tls.key),
        allowed_origins=["https://console.example.test"],
        environ=ENV,
    )
    app = http_app(build_server("127.0.0.1:1", tls=False, http=listener), listener)
    with TestClient(app, base_url="https://10.0.0.5:8443") as client:
        yield client


def test_a_reachable_listener_refuses_requests_without_the_token(remote_app: TestClient):
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                    {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}):  # fmt: skip
        refused = remote_app.post("/mcp", json=INITIALIZE, headers={**ACCEPT, **headers})
        assert refused.status_code == 401, headers
        assert refused.headers["www-authenticate"].startswith("Bearer ")
    for scheme in ("Bearer", "bearer"):
        accepted = remote_app.post(
            "/mcp", json=INITIALIZE, headers={**ACCEPT, "Authorization": f"{scheme} {TOKEN}"}
        )
        assert accepted.status_code == 200 and '"serverInfo"' in accepted.text


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 200),
        ({"Host": "mcp.example.test:8443"}, 200),
        ({"Origin": "https://10.0.0.5:8443"}, 200),
        ({"Origin": "https://console.example.test"}, 200),
        ({"Host": "evil.example:8443"}, 421),
        ({"Host": "localhost:8443"}, 421),
        ({"Host": "10.0.0.5:9999"}, 421),
        ({"Origin": "https://evil.example"}, 403),
        ({"Origin": "http://10.0.0.5:8443"}, 403),
    ],
)
def test_a_reachable_listener_checks_host_and_origin(
    remote_app: TestClient, headers: dict[str, str], status: int
):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    reply = remote_app.post("/mcp", json=INITIALIZE, headers={**ACCEPT, **auth, **headers})
    assert reply.status_code == status, reply.text


def test_a_server_built_without_the_token_is_never_served_over_http():
    listener = http_listener("127.0.0.1:8765", environ=ENV)
    with pytest.raises(ValueError, match="without the listener's bearer token"):
        http_app(build_server("127.0.0.1:1", tls=False), listener)
