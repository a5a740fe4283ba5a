"""The HTTP listener serving the web UI, over real loopback HTTP with a
stand-in JSON API: each view's path is the page, without the token; `/`
sends to the workflows or the tasks page; any other path is the page with
404; the API's reads go to `answer` and its changes (POST) to `act` only
with the token, the `X-Cortex-Request` header and a JSON body of a stated,
bounded length."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus

import pytest
from prometheus_client import CollectorRegistry

from cortex.http import HttpListener
from cortex.http.api_requests import MAX_BODY_BYTES
from cortex.http.json_answers import ApiAnswer
from tests.metrics_scrape import Response, request

TOKEN = "ui-token-5678"
PAGES = ("/tasks", "/tasks/0f1e2d", "/workflows", "/workflows/abc%20def", "/nodes", "/cluster")
CHANGE = {"Content-Type": "application/json", "X-Cortex-Request": "1"}


@dataclass
class StandInApi:
    workflows: int = 0
    reads: list[tuple[str, str]] = field(default_factory=list)
    changes: list[tuple[str, str, bytes]] = field(default_factory=list)

    def answer(self, path: str, query: str) -> ApiAnswer:
        self.reads.append((path, query))
        return ApiAnswer(HTTPStatus.OK, {"path": path, "total": self.workflows})

    def act(self, path: str, query: str, body: bytes) -> ApiAnswer:
        self.changes.append((path, query, body))
        return ApiAnswer(HTTPStatus.OK, {"acted": path})


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[str, StandInApi]]]:
    started: list[HttpListener] = []

    def make(token: str | None = None, workflows: int = 0) -> tuple[str, StandInApi]:
        web = StandInApi(workflows)
        listener = HttpListener("127.0.0.1:0", CollectorRegistry(), api_token=token)
        listener.start(web)
        started.append(listener)
        return f"http://{listener.address}", web

    yield make
    for listener in started:
        listener.stop()


def unfollowed(base: str, path: str, headers: dict[str, str] | None = None) -> Response:
    """The answer to GET, redirects not followed."""
    host = base.removeprefix("http://")
    connection = http.client.HTTPConnection(host, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        answer = connection.getresponse()
        return Response(answer.status, answer.headers, answer.read())
    finally:
        connection.close()


def test_every_view_path_is_the_page_without_the_token(serve: Callable[..., tuple]) -> None:
    base, web = serve(token=TOKEN)
    page = request(f"{base}/tasks")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert b'src="/ui/app.js"' in page.body
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    for path in PAGES:
        shown = request(f"{base}{path}?state=running&label=k%3Dv")
        assert (shown.status, shown.body) == (200, page.body), path
    for name in ("app.js", "navigation.js", "tasks.js", "dag.js", "app.css"):
        asset = request(f"{base}/ui/{name}")
        assert asset.status == 200, name
    assert request(f"{base}/ui/app.js").headers["Content-Type"].startswith("text/javascript")
    assert request(f"{base}/tasks", method="POST", data=b"").status == 405
    head = request(f"{base}/nodes", method="HEAD")
    assert head.status == 200 and head.body == b""
    assert web.reads == [] and web.changes == []


def test_any_other_path_is_the_page_saying_404(serve: Callable[..., tuple]) -> None:
    base, _ = serve(token=TOKEN)
    page = request(f"{base}/tasks").body
    for path in ("/nope", "/tasks/a/b", "/tasks/", "/nodes/n1", "/clusters", "/index.html"):
        missing = request(f"{base}{path}")
        assert (missing.status, missing.body) == (404, page), path
        assert missing.headers["Content-Type"].startswith("text/html")
    # The node's own paths stay behind the token, known or not.
    for path in ("/ui/nope.js", "/metrics", "/api/v1/nope"):
        assert request(f"{base}{path}").status == 401, path
    assert request(f"{base}/ui/nope.js", TOKEN).status == 404


def test_the_front_page_is_workflows_when_there_are_any(serve: Callable[..., tuple]) -> None:
    base, web = serve(workflows=2)
    sent = unfollowed(base, "/")
    assert sent.status == 302 and sent.headers["Location"] == "/workflows"
    assert web.reads == [("/api/v1/workflows", "page_size=1")]
    base, _ = serve(workflows=0)
    assert unfollowed(base, "/").headers["Location"] == "/tasks"
    # Without the token there is nothing to tell by: the tasks page, which
    # asks for it.
    base, web = serve(token=TOKEN, workflows=2)
    assert unfollowed(base, "/").headers["Location"] == "/tasks"
    assert web.reads == []
    with_token = {"Authorization": f"Bearer {TOKEN}"}
    assert unfollowed(base, "/", with_token).headers["Location"] == "/workflows"
    with_cookie = {"Cookie": f"cortex_token={TOKEN}"}
    assert unfollowed(base, "/", with_cookie).headers["Location"] == "/workflows"


def test_reads_go_to_answer_and_changes_to_act(serve: Callable[..., tuple]) -> None:
    base, web = serve(token=TOKEN)
    read = request(f"{base}/api/v1/tasks?state=running", TOKEN)
    assert read.status == 200 and json.loads(read.body)["path"] == "/api/v1/tasks"
    assert web.reads == [("/api/v1/tasks", "state=running")]
    body = b'{"expected": 3}'
    changed = request(f"{base}/api/v1/tasks/cancel?label=a%3Db", TOKEN, method="POST",
                      headers=CHANGE, data=body)  # fmt: skip
    assert changed.status == 200 and json.loads(changed.body) == {"acted": "/api/v1/tasks/cancel"}
    assert web.changes == [("/api/v1/tasks/cancel", "label=a%3Db", body)]
    # The login cookie does as well as the header; an empty body is one.
    cookie = {**CHANGE, "Cookie": f"cortex_token={TOKEN}"}
    assert request(f"{base}/api/v1/nodes/n1/cordon", method="POST", headers=cookie,
                   data=b"").status == 200  # fmt: skip
    assert web.changes[-1] == ("/api/v1/nodes/n1/cordon", "", b"")
    refused = request(f"{base}/api/v1/tasks", TOKEN, method="PUT", headers=CHANGE, data=b"{}")
    assert refused.status == 405 and refused.headers["Allow"] == "GET, HEAD, POST"
    assert json.loads(refused.body)["error"]


@pytest.mark.parametrize(
    ("headers", "data", "status", "named"),
    [
        ({"Content-Type": "application/json"}, b"{}", 403, "X-Cortex-Request"),
        ({**CHANGE, "X-Cortex-Request": "0"}, b"{}", 403, "X-Cortex-Request"),
        ({**CHANGE, "Content-Type": "application/x-www-form-urlencoded"}, b"a=1", 415,
         "application/json"),
    ],
)  # fmt: skip
def test_a_change_without_what_it_needs_is_refused_unread(
    serve: Callable[..., tuple], headers: dict[str, str], data: bytes, status: int, named: str
) -> None:
    base, web = serve(token=TOKEN)
    refused = request(f"{base}/api/v1/tasks/t1/cancel", TOKEN, method="POST", headers=headers,
                      data=data)  # fmt: skip
    assert refused.status == status
    assert named in json.loads(refused.body)["error"]
    assert web.changes == []


def sent_without_body(base: str, headers: dict[str, str]) -> tuple[int, str]:
    """A change's status and error, its headers sent and no body."""
    connection = http.client.HTTPConnection(base.removeprefix("http://"), timeout=10)
    try:
        connection.putrequest("POST", "/api/v1/tasks/t1/cancel")
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())["error"]
    finally:
        connection.close()


def test_a_change_needs_the_token_and_a_length_within_bounds(
    serve: Callable[..., tuple],
) -> None:
    base, web = serve(token=TOKEN)
    anonymous = request(f"{base}/api/v1/tasks/t1/cancel", method="POST", headers=CHANGE, data=b"{}")
    assert anonymous.status == 401
    allowed = {**CHANGE, "Authorization": f"Bearer {TOKEN}"}
    status, error = sent_without_body(base, allowed)
    assert status == 411 and "Content-Length" in error
    too_long = {**allowed, "Content-Length": str(MAX_BODY_BYTES + 1)}
    status, error = sent_without_body(base, too_long)
    assert status == 413 and str(MAX_BODY_BYTES) in error
    assert web.changes == []
