"""Page tokens of the listings (ListTasks, ListDeadLetterTasks, ListWorkflows).
Opaque to clients: the urlsafe base64 of a small JSON object holding the key
of the page's last item (its submit index and id), the order, and a digest of
the filters, so a token is refused with other filters or another order
instead of silently paging a different listing."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cortex.errors import InvalidArgument
from cortex.requests import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from cortex.state.paging import CreatedWindow, PageKey

VERSION = 1
_NEWEST_FIRST, _OLDEST_FIRST = "newest_first", "oldest_first"


def page_size(requested: int) -> int:
    """The page size a request asks for: 0 is the default, more than the
    maximum is the maximum, negative is refused."""
    if requested < 0:
        raise InvalidArgument(f"page_size must not be negative, not {requested}")
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def window_filters(created: CreatedWindow) -> dict[str, int]:
    """A creation window's part of a listing's filters: nothing when it is
    open, so tokens issued without one stay valid."""
    bounds = {"created_from_ms": created.start_ms, "created_before_ms": created.end_ms}
    return {key: value for key, value in bounds.items() if value is not None}


@dataclass(frozen=True)
class PageTokens:
    """The tokens of one listing (`listing`, e.g. "tasks") with one set of
    filters and one order."""

    listing: str
    filters: Mapping[str, Any]
    newest_first: bool = True

    @property
    def _order(self) -> str:
        return _NEWEST_FIRST if self.newest_first else _OLDEST_FIRST

    def _digest(self) -> str:
        text = json.dumps(
            {"listing": self.listing, "filters": self.filters, "order": self._order},
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def issue(self, last: PageKey | None) -> str:
        """The token of the page after `last`; empty on the last page."""
        if last is None:
            return ""
        body = {
            "v": VERSION,
            "order": self._order,
            "last": [last.submit_index, last.id],
            "filters": self._digest(),
        }
        raw = json.dumps(body, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def read(self, token: str) -> PageKey | None:
        """Where the page a token asks for starts (None without a token).
        InvalidArgument for a token this listing did not issue, or issued
        with other filters or another order."""
        if not token:
            return None
        body = _decode(token)
        if body.get("order") != self._order or body.get("filters") != self._digest():
            raise InvalidArgument(
                "page_token was issued for other filters or another order; list again"
                " without it, or with the filters and order of the first page"
            )
        submit_index, item_id = body["last"]
        return PageKey(submit_index, item_id)


def _decode(token: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        body = None
    last = body.get("last") if isinstance(body, dict) else None
    if (
        not isinstance(body, dict)
        or body.get("v") != VERSION
        or not isinstance(last, list)
        or len(last) != 2
        or type(last[0]) is not int
        or not isinstance(last[1], str)
    ):
        raise InvalidArgument(f"page_token {token[:64]!r} is not a next_page_token of this listing")
    return body
