"""Checks every interface applies to request fields before anything is read
or proposed: ids, idempotency keys, state filters and page tokens."""

from __future__ import annotations

from collections.abc import Iterable

from cortex.errors import InvalidArgument

MAX_ID_CHARS = 128
MAX_IDEMPOTENCY_KEY = 256
MAX_PAGE_SIZE = 1000
# Tasks one SubmitTasks call may carry.
MAX_SUBMIT_BATCH = 1000
DEFAULT_PAGE_SIZE = 100
# Longest a single call may wait for a task to end.
MAX_WAIT_MS = 600_000
# Longest a drain may give running tasks: 30 days.
MAX_DRAIN_DEADLINE_MS = 30 * 86_400_000


def check_id(value: str, name: str) -> None:
    if not value:
        raise InvalidArgument(f"{name} is empty")
    if len(value) > MAX_ID_CHARS:
        raise InvalidArgument(f"{name} is longer than {MAX_ID_CHARS} characters")


def check_idempotency_key(key: str | None) -> None:
    if key is not None and len(key) > MAX_IDEMPOTENCY_KEY:
        raise InvalidArgument(f"idempotency_key is longer than {MAX_IDEMPOTENCY_KEY} characters")


def check_states(states: Iterable[str] | None, known: Iterable[str], kind: str) -> None:
    known = tuple(known)
    for state in states or []:
        if state not in known:
            raise InvalidArgument(f"unknown {kind} state {state!r} (known: {', '.join(known)})")


def parse_page(page_size: int, page_token: str) -> tuple[int, int]:
    """(limit, offset) from a page size (0 = default) and an opaque token."""
    if page_size < 0 or page_size > MAX_PAGE_SIZE:
        raise InvalidArgument(f"page_size must be between 1 and {MAX_PAGE_SIZE}")
    try:
        offset = int(page_token) if page_token else 0
        if offset < 0:
            raise ValueError
    except ValueError:
        raise InvalidArgument(
            f"page_token {page_token!r} is not a token from an earlier page"
        ) from None
    return page_size or DEFAULT_PAGE_SIZE, offset
