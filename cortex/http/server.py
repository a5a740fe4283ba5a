"""The node's HTTP listener: Prometheus metrics at `/metrics` and, when
given the web API, the web UI (its pages at `/tasks`, `/workflows`,
`/nodes`, `/cluster`, `/` sending to one of them, its files under `/ui/`),
its JSON API (`/api/v1/...`: reads by GET, changes by POST) and its login
(`POST /login`, `POST /logout`); from the standard library's threaded HTTP
server on a daemon thread. It takes the node's API token
(`cortex.http.web_auth`) and TLS settings, as the gRPC API does."""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import ssl
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from cortex.config import WILDCARD_HOSTS
from cortex.errors import ConfigError
from cortex.http.change_guard import change_refusal
from cortex.http.json_answers import ApiAnswer
from cortex.http.ui_assets import (
    TASKS_PAGE,
    UI_HEADERS,
    UI_PATH,
    WORKFLOWS_PAGE,
    UiAssets,
    is_page,
)
from cortex.http.web_api import API_PREFIX
from cortex.http.web_auth import (
    LOGIN_PATH,
    LOGOUT_PATH,
    MAX_FORM_BYTES,
    TokenCheck,
    login_answer,
    logout_answer,
)

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
API_PATH = "/api/"
ALLOWED_METHODS = "GET, HEAD"
API_METHODS = "GET, HEAD, POST"
API_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
UNAUTHORIZED = "missing or wrong API token: send Authorization: Bearer TOKEN"
# A client gets this long for its TLS handshake and its request, so a
# silent connection cannot hold a thread for good.
REQUEST_TIMEOUT_S = 10.0
# Requests answered at once, each on a thread of its own; a connection
# beyond them is closed at once rather than given another thread.
MAX_CONCURRENT_REQUESTS = 8


def server_tls_context(
    cert_file: str, key_file: str, client_ca_pem: bytes | None
) -> ssl.SSLContext:
    """TLS with the node's certificate and key; with `client_ca_pem`, callers
    must present a certificate that CA signed (as on the gRPC port)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca_pem is not None:
        context.load_verify_locations(cadata=client_ca_pem.decode())
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class JsonApi(Protocol):
    """The JSON API under `/api/v1/` (`cortex.http.web_api.WebApi`)."""

    def answer(self, path: str, query: str) -> ApiAnswer:
        """The answer to `GET path?query`."""
        ...

    def act(self, path: str, query: str, body: bytes) -> ApiAnswer:
        """The answer to `POST path?query` with `body`."""
        ...


def _bind_host(host: str) -> tuple[str, socket.AddressFamily]:
    bare = host.strip("[]")
    if host in WILDCARD_HOSTS and ":" not in bare:
        return "0.0.0.0", socket.AF_INET
    return bare, socket.AF_INET6 if ":" in bare else socket.AF_INET


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        family: socket.AddressFamily,
        registry: CollectorRegistry,
        token: str | None,
        tls: ssl.SSLContext | None,
    ) -> None:
        self.address_family = family
        self.registry = registry
        self.tokens = TokenCheck(token)
        self.tls = tls
        self.web: JsonApi | None = None
        self.assets: UiAssets | None = None
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT_REQUESTS)
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the host's name up in DNS (getfqdn),
        # which can take seconds; nothing here needs it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.debug("refused %s: %d requests in progress", client_address,
                      MAX_CONCURRENT_REQUESTS)  # fmt: skip
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs on the request's own thread, so a slow TLS handshake holds
        up no one else."""
        request.settimeout(REQUEST_TIMEOUT_S)
        if self.tls is None:
            _Handler(request, client_address, self)
            return
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except OSError as err:  # ssl.SSLError included
            log.debug("TLS handshake with %s failed: %s", client_address, err)
            return
        try:
            _Handler(wrapped, client_address, self)
        finally:
            wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("HTTP request from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "cortex"
    timeout = REQUEST_TIMEOUT_S

    def do_GET(self) -> None:  # noqa: N802 (http.server's names)
        self._answer()

    # Every method is taken here; each path answers 405 for those it does
    # not take (after 401 where the token is missing, or 404).
    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def _answer(self) -> None:
        target = urlsplit(self.path)
        path, web, assets = target.path, self.server.web, self.server.assets
        with_body = self.command != "HEAD"
        if web is not None and assets is not None and self._ui(path, web, assets):
            return
        if not self.server.tokens.allows(self.headers):
            challenge = {"WWW-Authenticate": 'Bearer realm="cortex"'}
            if web is not None and path.startswith(API_PATH):
                answer = ApiAnswer(HTTPStatus.UNAUTHORIZED, {"error": UNAUTHORIZED}, challenge)
                self._send_json(answer, with_body)
            else:
                self._send_text(HTTPStatus.UNAUTHORIZED, UNAUTHORIZED + "\n", with_body, challenge)
            return
        if path == METRICS_PATH:
            if self._method_allowed(with_body):
                self._metrics(with_body)
        elif web is not None and path.startswith(API_PATH):
            self._api(web, path, target.query)
        else:
            self._send_text(HTTPStatus.NOT_FOUND, f"not found; metrics are at {METRICS_PATH}\n",
                            with_body)  # fmt: skip

    def _ui(self, path: str, web: JsonApi, assets: UiAssets) -> bool:
        """Answers what the web UI serves without the token (its files, its
        pages, `/`, a 404 page for a path that is none of the node's, the
        login); False for anything else."""
        with_body = self.command != "HEAD"
        asset = assets.find(path)
        if asset is not None or is_page(path):
            if self._method_allowed(with_body):
                shown = asset or assets.page
                self._send(HTTPStatus.OK, shown.body, shown.content_type, with_body, UI_HEADERS)
        elif path == "/":
            if self._method_allowed(with_body):
                headers = {"Location": self._front_page(web), "Cache-Control": "no-store"}
                self._send_text(HTTPStatus.FOUND, "", with_body, headers)
        elif path in (LOGIN_PATH, LOGOUT_PATH):
            self._session(path)
        elif path == METRICS_PATH or path.startswith((API_PATH, UI_PATH)):
            return False
        else:
            # The page, which says there is no such view: the same for any
            # path, so it tells nothing to a caller without the token.
            page = assets.page
            self._send(HTTPStatus.NOT_FOUND, page.body, page.content_type, with_body, UI_HEADERS)
        return True

    def _front_page(self, web: JsonApi) -> str:
        """The workflows page when the cluster has any workflow, else the
        tasks page (also when the request cannot read the API to tell)."""
        if not self.server.tokens.allows(self.headers):
            return TASKS_PAGE
        listing = web.answer(API_PREFIX + "workflows", "page_size=1")
        if listing.status == HTTPStatus.OK and listing.body.get("total"):
            return WORKFLOWS_PAGE
        return TASKS_PAGE

    def _api(self, web: JsonApi, path: str, query: str) -> None:
        """GET and HEAD read (`web.answer`); POST changes (`web.act`), when
        `cortex.http.change_guard` lets it through."""
        if self.command in ("GET", "HEAD"):
            self._send_json(web.answer(path, query), self.command == "GET")
            return
        if self.command != "POST":
            error = {"error": f"{self.command} not allowed: {API_METHODS}"}
            answer = ApiAnswer(HTTPStatus.METHOD_NOT_ALLOWED, error, {"Allow": API_METHODS})
            self._send_json(answer, True)
            return
        refusal = change_refusal(self.headers)
        if refusal is not None:
            self._send_json(refusal, True)
            return
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._send_json(web.act(path, query, body), True)

    def _method_allowed(self, with_body: bool) -> bool:
        """Whether the method is GET or HEAD; answers 405 when not."""
        if self.command in ("GET", "HEAD"):
            return True
        self._send_text(
            HTTPStatus.METHOD_NOT_ALLOWED,
            f"{self.command} not allowed: {ALLOWED_METHODS}\n",
            with_body,
            {"Allow": ALLOWED_METHODS},
        )
        return False

    def _metrics(self, with_body: bool) -> None:
        encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
        try:
            body = encoder(self.server.registry)
        except Exception:
            log.exception("collecting metrics failed")
            self._send_text(HTTPStatus.INTERNAL_SERVER_ERROR, "collecting metrics failed\n",
                            with_body)  # fmt: skip
            return
        self._send(HTTPStatus.OK, body, content_type, with_body)

    def _session(self, path: str) -> None:
        """`POST /login`, a form holding `token`: the cookie, or 401 when it
        is not the token. `POST /logout`: the cookie dropped."""
        if self.command != "POST":
            self._send_text(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} not allowed: POST\n",
                            self.command != "HEAD", {"Allow": "POST"})  # fmt: skip
            return
        secure = self.server.tls is not None
        if path == LOGOUT_PATH:
            self._send_json(logout_answer(secure), True)
            return
        length = self.headers.get("Content-Length", "")
        if not (length.isascii() and length.isdigit()) or int(length) > MAX_FORM_BYTES:
            problem = f"a login form needs a Content-Length of at most {MAX_FORM_BYTES} bytes"
            self._send_json(ApiAnswer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": problem}),
                            True)  # fmt: skip
            return
        form = self.rfile.read(int(length))
        self._send_json(login_answer(self.server.tokens, form, secure), True)

    def _send_json(self, answer: ApiAnswer, with_body: bool) -> None:
        headers = {**API_HEADERS, **answer.headers}
        if answer.status == HTTPStatus.NO_CONTENT:
            self._send(answer.status, b"", "application/json", False, headers)
            return
        body = json.dumps(answer.body, separators=(",", ":")).encode()
        self._send(answer.status, body, "application/json", with_body, headers)

    def _send_text(
        self,
        status: HTTPStatus,
        text: str,
        with_body: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8", with_body, headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        with_body: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s: " + format, self.address_string(), *args)


class HttpListener:
    """Bound when made, so a port in use is a config error at start (naming
    `config_key`); serves from `start` until `stop`."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        api_token: str | None = None,
        tls: ssl.SSLContext | None = None,
        config_key: str = "http",
    ) -> None:
        host, _, port = address.rpartition(":")
        bind_host, family = _bind_host(host)
        try:
            self._server = _Server((bind_host, int(port)), family, registry, api_token, tls)
        except OSError as err:
            reason = err.strerror or os.strerror(err.errno or 0)
            raise ConfigError(
                f"config key {config_key}: cannot listen on {address}: {reason}"
            ) from None
        self._host = host
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def address(self) -> str:
        """Where it listens, with the port it got."""
        return f"{self._host}:{self.port}"

    @property
    def scheme(self) -> str:
        return "https" if self._server.tls is not None else "http"

    def start(self, web: JsonApi | None = None) -> None:
        """Serves `/metrics`, and with `web` the web UI and its API too."""
        if web is not None:
            self._server.web, self._server.assets = web, UiAssets()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http", kwargs={"poll_interval": 0.5},
            daemon=True,
        )  # fmt: skip
        self._thread.start()

    def stop(self) -> None:
        """Stops taking requests and closes the port (requests being answered
        finish on their own threads)."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
