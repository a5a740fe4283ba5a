"""What a change to the JSON API (a POST under `/api/v1/`) must carry before
its body is read: the header `X-Cortex-Request: 1`, which a page of another
site cannot set (it can send a form here, and the browser would add the
login cookie), and a JSON body of a stated length of at most
`MAX_BODY_BYTES`."""

from __future__ import annotations

from email.message import Message
from http import HTTPStatus

from cortex.http.api_requests import MAX_BODY_BYTES
from cortex.http.json_answers import ApiAnswer

CHANGE_HEADER = "X-Cortex-Request"


def change_refusal(headers: Message) -> ApiAnswer | None:
    """Why a change with these headers is refused unread; None when it is not."""
    if headers.get(CHANGE_HEADER, "").strip() != "1":
        problem = f"a change needs the header {CHANGE_HEADER}: 1 (which other sites cannot set)"
        return ApiAnswer(HTTPStatus.FORBIDDEN, {"error": problem})
    length = headers.get("Content-Length")
    if length is None or "Transfer-Encoding" in headers:
        problem = "a change needs a Content-Length (its JSON body may be empty)"
        return ApiAnswer(HTTPStatus.LENGTH_REQUIRED, {"error": problem})
    if not (length.isascii() and length.isdigit()) or int(length) > MAX_BODY_BYTES:
        problem = f"a change's body is JSON of at most {MAX_BODY_BYTES} bytes"
        return ApiAnswer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": problem})
    content_type = headers.get_content_type()
    if int(length) > 0 and content_type != "application/json":
        problem = f"a change's body is application/json, not {content_type}"
        return ApiAnswer(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": problem})
    return None
