"""Serving the MCP tools over streamable HTTP without handing the cluster to
whoever reaches the port: every request carries a bearer token (checked by
the SDK's token-verifier hook, compared in constant time), Host and Origin
headers are checked on every address, and an address other machines can
reach needs TLS or an explicit opt-out."""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl, Field

from cortex.api.auth import TOKEN_ENV
from cortex.api.tls import read_key_pair
from cortex.config import WILDCARD_HOSTS, check_address
from cortex.defaults import read_secret_file
from cortex.errors import ConfigError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.applications import Starlette

MCP_TOKEN_ENV = "CORTEX_MCP_TOKEN"
MCP_PATH = "/mcp"
MIN_TOKEN_LENGTH = 16
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_HOW_TO_GIVE_A_TOKEN = (
    f"set ${MCP_TOKEN_ENV}, or pass --http-token-file FILE (or --http-token, which `ps` shows), "
    f"or give the cluster's API token (${TOKEN_ENV} / --token)"
)


class _OperatorToken(AccessToken):
    """The one principal a token-protected server knows; the token itself is
    kept out of reprs so it cannot reach a log line."""

    token: str = Field(repr=False)


class StaticTokenVerifier:
    """The SDK's `TokenVerifier` for one shared bearer token."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._expected):
            return _OperatorToken(token=token, client_id="cortex-mcp", scopes=[])
        return None


@dataclass(frozen=True)
class HttpListener:
    """A checked `cortex mcp --http` setup: where to listen, the token every
    request must carry, TLS files, and the Host and Origin values accepted."""

    host: str
    port: int
    token: str = field(repr=False)
    token_source: str
    tls_cert: str | None
    tls_key: str | None
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{_host_port(self.host, self.port)}{MCP_PATH}"

    def auth_settings(self) -> AuthSettings:
        # The SDK's settings name an OAuth issuer; a static token's issuer is
        # the operator of this very server. Without a resource_server_url no
        # OAuth metadata routes are served.
        return AuthSettings(
            issuer_url=AnyHttpUrl(f"{self.scheme}://{_host_port(self.host, self.port)}"),
            resource_server_url=None,
        )

    def token_verifier(self) -> StaticTokenVerifier:
        return StaticTokenVerifier(self.token)

    def transport_security(self) -> TransportSecuritySettings:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(self.allowed_hosts),
            allowed_origins=list(self.allowed_origins),
        )


def resolve_token(
    token: str | None, token_file: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """The bearer token and where it came from: --http-token, then
    --http-token-file, then $CORTEX_MCP_TOKEN, then the cluster's API token
    ($CORTEX_API_TOKEN, which --token sets). ConfigError when there is none
    or it is unfit for an HTTP header."""
    env = os.environ if environ is None else environ
    if token and token_file:
        raise ConfigError("give --http-token or --http-token-file, not both")
    candidates = (
        (token, "--http-token"),
        (
            read_secret_file(token_file, "--http-token-file") if token_file else None,
            f"--http-token-file {token_file}",
        ),
        (env.get(MCP_TOKEN_ENV, "").strip(), f"${MCP_TOKEN_ENV}"),
        (env.get(TOKEN_ENV, "").strip(), f"the API token (${TOKEN_ENV} / --token)"),
    )
    for value, source in candidates:
        if value:
            _check_token(value, source)
            return value, source
    raise ConfigError(f"MCP over HTTP needs a bearer token: {_HOW_TO_GIVE_A_TOKEN}")


def _check_token(token: str, source: str) -> None:
    if not all(33 <= ord(c) <= 126 for c in token):
        raise ConfigError(
            f"{source}: an MCP bearer token must be printable ASCII without spaces "
            "(it travels in an HTTP header)"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"{source}: an MCP bearer token needs at least {MIN_TOKEN_LENGTH} characters, "
            f"got {len(token)} (e.g. `openssl rand -hex 32`)"
        )


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or IP, without brackets) only reaches this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_port(host: str, port: int | str) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _host_headers(host: str, port: int, scheme: str) -> list[str]:
    """The Host header a client sends for host:port; on the scheme's default
    port it may leave the port out."""
    forms = [_host_port(host, port)]
    if port == {"http": 80, "https": 443}[scheme]:
        forms.append(f"[{host}]" if ":" in host else host)
    return forms


def _split_address(address: str) -> tuple[str, int]:
    try:
        host, _, port = check_address(address).rpartition(":")
    except ValueError as err:
        raise ConfigError(f"--http: {err}") from None
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or host == "*":
        raise ConfigError(f"--http: {address!r} has no host; use e.g. 127.0.0.1:8765")
    return host, int(port)


def _allowed_host_values(value: str, port: int) -> list[str]:
    """An --allowed-host value as Host headers: `NAME` means NAME on the listen
    port or on the scheme's default port (no port in the header); `NAME:PORT`
    and `NAME:*` are taken as they are. IPv6 addresses go in brackets."""
    text = value.strip()
    if not text or any(c in text for c in "/@,") or any(c.isspace() for c in text):
        raise ConfigError(
            f"--allowed-host: {value!r} is not a host name or HOST:PORT (no scheme or path)"
        )
    if text.startswith("["):
        name, close, rest = text[1:].partition("]")
        if not close or not name or (rest and not rest.startswith(":")):
            raise ConfigError(f"--allowed-host: {value!r} is not [IPV6] or [IPV6]:PORT")
        if not rest:
            return [f"[{name}]:{port}", f"[{name}]"]
        port_text = rest[1:]
    elif text.count(":") > 1:
        return [f"[{text}]:{port}", f"[{text}]"]
    else:
        name, sep, port_text = text.partition(":")
        if not sep:
            return [f"{text}:{port}", text]
    if not (port_text.isdigit() or port_text == "*"):
        raise ConfigError(f"--allowed-host: {value!r} has a bad port {port_text!r}")
    return [text]


def _origin_values(value: str) -> str:
    text = value.strip().rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
        raise ConfigError(
            f"--allowed-origin: {value!r} is not an origin such as https://agents.example.com "
            "or http://localhost:* (scheme, host, optional port; no path)"
        )
    return text


def _certificate_names(cert_path: str) -> list[str]:
    """The DNS names and IP addresses the certificate is valid for (wildcard
    names left out: a Host check cannot match them)."""
    certificate = x509.load_pem_x509_certificates(Path(cert_path).read_bytes())[0]
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    names = [n for n in san.get_values_for_type(x509.DNSName) if not n.startswith("*")]
    return names + [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]


def http_listener(
    address: str,
    *,
    token: str | None = None,
    token_file: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    insecure_http: bool = False,
    environ: Mapping[str, str] | None = None,
) -> HttpListener:
    """Checks a `cortex mcp --http` setup before anything listens: a token is
    required; an address other machines can reach needs TLS or
    `insecure_http`; a wildcard address needs a host name to check Host
    headers against. Each refusal is a ConfigError that names the flags."""
    host, port = _split_address(address)
    secret, source = resolve_token(token, token_file, environ)
    if tls_cert and not tls_key:
        raise ConfigError("--http-tls-cert needs --http-tls-key too")
    if tls_key and not tls_cert:
        raise ConfigError("--http-tls-key needs --http-tls-cert too")
    if tls_cert and tls_key:
        read_key_pair(tls_cert, tls_key, "--http-tls-cert", "--http-tls-key")
    loopback = is_loopback(host)
    wildcard = host in WILDCARD_HOSTS
    if not loopback and not tls_cert and not insecure_http:
        raise ConfigError(
            f"--http {address} can be reached from other machines and the bearer token would "
            "cross the network in clear text: serve TLS with --http-tls-cert PEM and "
            "--http-tls-key PEM, or pass --insecure-http to accept that (e.g. behind a "
            "TLS-terminating proxy)"
        )
    scheme = "https" if tls_cert else "http"
    named = [v for value in allowed_hosts for v in _allowed_host_values(value, port)]
    cert_names = _certificate_names(tls_cert) if tls_cert else []
    certified = [v for name in cert_names for v in _host_headers(name, port, scheme)]
    if wildcard and not named and not certified:
        raise ConfigError(
            f"--http {address} listens on every interface, so the Host header clients send is "
            "not known: name the host they connect to with --allowed-host HOST[:PORT] "
            "(repeatable), or serve a certificate that names it"
        )
    hosts: list[str] = [] if wildcard else _host_headers(host, port, scheme)
    if loopback or wildcard:
        hosts += [v for name in _LOOPBACK_NAMES for v in _host_headers(name, port, scheme)]
    hosts = list(dict.fromkeys([*hosts, *certified, *named]))
    origins = [f"{scheme}://{h}" for h in hosts]
    origins += [_origin_values(value) for value in allowed_origins]
    return HttpListener(
        host=host,
        port=port,
        token=secret,
        token_source=source,
        tls_cert=tls_cert,
        tls_key=tls_key,
        allowed_hosts=tuple(hosts),
        allowed_origins=tuple(dict.fromkeys(origins)),
    )


def http_app(server: MCPServer, listener: HttpListener) -> Starlette:
    """The ASGI app serving `server` at `listener.url`; `server` must have been
    built with `build_server(..., http=listener)` so that it checks the token."""
    if server.settings.auth is None:
        raise ValueError("the MCP server was built without the listener's bearer token")
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=listener.host,
        transport_security=listener.transport_security(),
    )


def serve_http(server: MCPServer, listener: HttpListener) -> None:
    """Serves `server` over streamable HTTP (HTTPS with the listener's
    certificate) until interrupted."""
    import uvicorn

    config = uvicorn.Config(
        http_app(server, listener),
        host=listener.host,
        port=listener.port,
        ssl_certfile=listener.tls_cert,
        ssl_keyfile=listener.tls_key,
        log_level="info",
    )
    uvicorn.Server(config).run()
