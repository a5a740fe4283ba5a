"""Who may use the HTTP listener. With an API token configured, every
request but the web UI's own files carries it: as `Authorization: Bearer
TOKEN` (scripts, Prometheus), or in the cookie the UI's login form has the
node set (browsers; `HttpOnly`, so the page's scripts never read it, and
`SameSite=Strict`, so other sites' pages never send it). Tokens are compared
in constant time."""

from __future__ import annotations

import hmac
from email.message import Message
from http import HTTPStatus
from urllib.parse import parse_qsl, quote, unquote_to_bytes

from cortex.api.auth import bearer_token
from cortex.http.json_answers import ApiAnswer

TOKEN_COOKIE = "cortex_token"
LOGIN_PATH = "/login"
LOGOUT_PATH = "/logout"
# A login form holds one token: anything longer is refused unread.
MAX_FORM_BYTES = 8 * 1024


class TokenCheck:
    def __init__(self, token: str | None) -> None:
        self._token = token.encode() if token else None

    @property
    def required(self) -> bool:
        return self._token is not None

    def accepts(self, given: bytes | None) -> bool:
        """Whether `given` is the token (anything is, with none configured)."""
        if self._token is None:
            return True
        return given is not None and hmac.compare_digest(given, self._token)

    def allows(self, headers: Message) -> bool:
        """Whether a request with these headers carries the token, in its
        Authorization header or its cookie."""
        if self._token is None:
            return True
        if self.accepts(bearer_token(headers.get("Authorization", ""))):
            return True
        return any(self.accepts(value) for value in cookie_values(headers, TOKEN_COOKIE))


def cookie_values(headers: Message, name: str) -> list[bytes]:
    """Every value a request's Cookie headers give `name`, percent-decoded."""
    found = []
    for header in headers.get_all("Cookie") or []:
        for pair in header.split(";"):
            key, equals, value = pair.strip().partition("=")
            if equals and key == name:
                found.append(unquote_to_bytes(value.strip().strip('"')))
    return found


def login_cookie(token: bytes, secure: bool) -> str:
    """The Set-Cookie value that keeps the token for the browser's session."""
    return _cookie(quote(token, safe=""), secure)


def logout_cookie(secure: bool) -> str:
    return _cookie("", secure) + "; Max-Age=0"


def _cookie(value: str, secure: bool) -> str:
    attributes = "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
    return f"{TOKEN_COOKIE}={value}{attributes}"


def form_token(body: bytes) -> bytes | None:
    """The `token` field of a URL-encoded login form."""
    try:
        fields = parse_qsl(
            body.decode("ascii"), keep_blank_values=True, errors="strict", max_num_fields=8
        )
    except ValueError:  # not ASCII (the form is URL-encoded), or too many fields
        return None
    tokens = [value for name, value in fields if name == "token"]
    return tokens[0].strip().encode() if len(tokens) == 1 and tokens[0].strip() else None


def login_answer(tokens: TokenCheck, form: bytes, secure: bool) -> ApiAnswer:
    """`POST /login` with a URL-encoded form holding `token`: 204 with the
    cookie when it is the token, else 401."""
    token = form_token(form)
    if token is None or not tokens.accepts(token):
        return ApiAnswer(HTTPStatus.UNAUTHORIZED, {"error": "that is not the API token"})
    return ApiAnswer(HTTPStatus.NO_CONTENT, headers={"Set-Cookie": login_cookie(token, secure)})


def logout_answer(secure: bool) -> ApiAnswer:
    return ApiAnswer(HTTPStatus.NO_CONTENT, headers={"Set-Cookie": logout_cookie(secure)})
