"""The web API's edges as plain functions: query strings read into typed
requests (empty values as no value, a bad, repeated or unknown parameter
refused naming it), errors mapped to HTTP statuses, the token taken from the
Authorization header or the login cookie, and output pages never ending in
the middle of a UTF-8 character."""

from __future__ import annotations

from email.message import Message
from http import HTTPStatus

import pytest

from cortex.errors import FailedPrecondition, NotFound, ResourceExhausted, Unavailable
from cortex.http.api_requests import (
    MAX_BULK_TASKS,
    BadParameter,
    BulkRequest,
    DrainRequest,
    LabelFilter,
    OutputRequest,
    TaskListRequest,
    WorkflowListRequest,
)
from cortex.http.json_answers import error_answer
from cortex.http.output_pages import _incomplete_tail
from cortex.http.web_auth import (
    TokenCheck,
    form_token,
    login_answer,
    login_cookie,
    logout_answer,
)

TOKEN = "s3cret token;=é"


def test_task_listing_parameters_are_read_into_a_typed_request() -> None:
    request = TaskListRequest.from_query(
        "state=running,queued&state=running&node=n1&workflow=wf1&label=team%3Dweb"
        "&label=urgent&label=k%3Da%2Cb&q=make+build&page_size=20&page_token=abc"
    )
    assert request == TaskListRequest(
        states=("running", "queued"),
        node="n1",
        workflow="wf1",
        labels=(LabelFilter("team", "web"), LabelFilter("urgent", None), LabelFilter("k", "a,b")),
        text="make build",
        page_token="abc",
        page_size=20,
    )
    # A form sends every field: empty ones filter on nothing.
    empty = TaskListRequest.from_query("state=&node=&workflow=&label=&q=&page_token=")
    assert empty == TaskListRequest()


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("state=bogus", "state"),
        ("node=a&node=b", "node"),
        ("label==web", "label"),
        ("page_size=0", "page_size"),
        ("page_size=1001", "page_size"),
        ("page_size=%C2%B2", "page_size"),  # a digit to str.isdigit, not a number
        ("page_size=-1", "page_size"),
        ("q=" + "x" * 257, "q"),
        ("node=" + "n" * 129, "node"),
        ("sort=oldest", "sort"),
        ("q=%FF", "query"),
    ],
)
def test_a_bad_task_listing_parameter_is_named(query: str, parameter: str) -> None:
    with pytest.raises(BadParameter) as refused:
        TaskListRequest.from_query(query)
    assert refused.value.parameter == parameter
    assert str(refused.value).startswith(f"{parameter}: ")


def test_a_bulk_change_takes_the_listing_filters_and_the_confirmed_count() -> None:
    bulk = BulkRequest.parse("state=running&label=team%3Dweb&q=build", b'{"expected": 12}')
    assert bulk == BulkRequest(
        TaskListRequest(states=("running",), labels=(LabelFilter("team", "web"),), text="build"),
        12,
    )
    assert DrainRequest.parse(b"") == DrainRequest(0)
    assert DrainRequest.parse(b'{"deadline_s": 30}') == DrainRequest(30)


@pytest.mark.parametrize(
    ("query", "body", "parameter"),
    [
        ("state=running", b"", "expected"),
        ("state=running", b'{"expected": "3"}', "expected"),
        ("state=running", b'{"expected": true}', "expected"),
        ("state=running", b'{"expected": -1}', "expected"),
        ("state=running", b'{"expected": %d}' % (MAX_BULK_TASKS + 1), "expected"),
        ("state=running", b'{"expected": 1, "all": true}', "all"),
        ("state=running", b"[1]", "body"),
        ("state=running", b"{not json", "body"),
        ("state=running", b'{"expected": 1}\xff', "body"),
        # Paging belongs to listings; a bulk change acts on every match.
        ("page_size=5", b'{"expected": 1}', "page_size"),
        ("state=lost", b'{"expected": 1}', "state"),
    ],
)
def test_a_bad_bulk_change_is_refused_naming_what_is_wrong(
    query: str, body: bytes, parameter: str
) -> None:
    with pytest.raises(BadParameter) as refused:
        BulkRequest.parse(query, body)
    assert refused.value.parameter == parameter


def test_a_bad_drain_deadline_is_named() -> None:
    for body in (b'{"deadline_s": -5}', b'{"deadline_s": "soon"}', b'{"until": 3}'):
        with pytest.raises(BadParameter):
            DrainRequest.parse(body)


def test_output_and_workflow_parameters() -> None:
    assert OutputRequest.from_query("") == OutputRequest(None, 0, 0)
    assert OutputRequest.from_query("stream=stderr&offset=42&attempt=2") == OutputRequest(
        "stderr", 42, 2
    )
    for query, parameter in (
        ("stream=both", "stream"),
        ("offset=-5", "offset"),
        ("offset=1e3", "offset"),
        ("attempt=99999999999", "attempt"),
        ("follow=1", "follow"),
    ):
        with pytest.raises(BadParameter) as refused:
            OutputRequest.from_query(query)
        assert refused.value.parameter == parameter
    assert WorkflowListRequest.from_query("state=failed,running").states == ("failed", "running")
    with pytest.raises(BadParameter, match="^state: unknown value 'queued'"):
        WorkflowListRequest.from_query("state=queued")


def test_errors_become_statuses_with_a_json_error() -> None:
    bad = error_answer(BadParameter("q", "too long"), "/api/v1/tasks")
    assert bad.status == HTTPStatus.BAD_REQUEST
    assert bad.body == {"error": "q: too long", "parameter": "q"}
    assert error_answer(NotFound("no task"), "/").status == HTTPStatus.NOT_FOUND
    assert error_answer(FailedPrecondition("gone"), "/").status == HTTPStatus.CONFLICT
    assert error_answer(Unavailable("down"), "/").status == HTTPStatus.SERVICE_UNAVAILABLE
    busy = error_answer(ResourceExhausted("busy", retry_after_s=0.2), "/")
    assert busy.status == HTTPStatus.TOO_MANY_REQUESTS and busy.headers == {"Retry-After": "1"}
    crash = error_answer(KeyError("secret detail"), "/api/v1/nodes")
    assert crash.status == HTTPStatus.INTERNAL_SERVER_ERROR
    assert "secret detail" not in crash.body["error"]


def _headers(**values: str) -> Message:
    message = Message()
    for name, value in values.items():
        message[name.replace("_", "-")] = value
    return message


def test_the_token_comes_in_the_authorization_header_or_the_cookie() -> None:
    check = TokenCheck(TOKEN)
    assert check.required
    assert not check.allows(_headers())
    assert check.allows(_headers(Authorization=f"Bearer {TOKEN}"))
    assert not check.allows(_headers(Authorization=f"Bearer {TOKEN}x"))
    # The cookie the login answer sets is accepted back, whatever the token holds.
    cookie = login_cookie(TOKEN.encode(), secure=False).split(";")[0]
    assert check.allows(_headers(Cookie=f"theme=dark; {cookie}; other=1"))
    assert not check.allows(_headers(Cookie="cortex_token=wrong"))
    assert not check.allows(_headers(Cookie=cookie.replace("cortex_token", "other_token")))
    assert TokenCheck(None).allows(_headers()) and not TokenCheck(None).required


def test_login_sets_a_strict_http_only_cookie_and_logout_drops_it() -> None:
    check = TokenCheck(TOKEN)
    form = b"token=s3cret+token%3B%3D%C3%A9"
    assert form_token(form) == TOKEN.encode()
    accepted = login_answer(check, form, secure=True)
    assert accepted.status == HTTPStatus.NO_CONTENT
    cookie = accepted.headers["Set-Cookie"]
    assert cookie.startswith("cortex_token=s3cret%20token%3B%3D%C3%A9; ")
    assert {"Path=/", "HttpOnly", "SameSite=Strict", "Secure"} <= set(cookie.split("; "))
    assert "Secure" not in login_answer(check, form, secure=False).headers["Set-Cookie"]
    for refused in (b"token=nope", b"", b"token=", b"token=a&token=b", b"\xff"):
        answer = login_answer(check, refused, secure=False)
        assert answer.status == HTTPStatus.UNAUTHORIZED and "Set-Cookie" not in answer.headers
    dropped = logout_answer(secure=False).headers["Set-Cookie"]
    assert dropped.startswith("cortex_token=;") and "Max-Age=0" in dropped


@pytest.mark.parametrize(
    ("data", "cut"),
    [
        (b"", 0),
        (b"abc", 0),
        ("café".encode(), 0),
        ("café".encode()[:-1], 1),  # é is two bytes
        ("x€".encode()[:-1], 2),  # € is three
        ("x€".encode()[:-2], 1),
        ("🙂".encode()[:-1], 3),  # four
        (b"\x80\x80\x80\x80", 0),  # not UTF-8: nothing held back
    ],
)
def test_an_output_page_never_ends_inside_a_character(data: bytes, cut: int) -> None:
    assert _incomplete_tail(data) == cut
