"""Ids by unique prefix: wherever a task or workflow id is taken, an id not
found as given is looked up as a prefix of one (at least `MIN_PREFIX_CHARS`
long). One match is that object; several are refused, naming some; none is
not found. Writes resolve before proposing, so entries carry full ids."""

from __future__ import annotations

from collections.abc import Callable

from cortex.errors import InvalidArgument, UnknownId

MIN_PREFIX_CHARS = 4
# Candidates an ambiguous prefix's error names before "…".
SHOWN_CANDIDATES = 3


def resolve_prefix(kind: str, prefix: str, with_prefix: Callable[[str, int], list[str]]) -> str:
    """The one `kind` ("task", "workflow") id starting with `prefix`;
    `with_prefix(prefix, limit)` lists up to `limit` such ids. UnknownId when
    none does (or the prefix is too short to look up), InvalidArgument
    naming candidates when several do."""
    if len(prefix) < MIN_PREFIX_CHARS:
        raise UnknownId(
            f"no {kind} with id {prefix} (an id prefix needs at least"
            f" {MIN_PREFIX_CHARS} characters)"
        )
    found = with_prefix(prefix, SHOWN_CANDIDATES + 1)
    if not found:
        raise UnknownId(f"no {kind} with id {prefix}")
    if len(found) == 1:
        return found[0]
    named = ", ".join(found[:SHOWN_CANDIDATES])
    more = ", …" if len(found) > SHOWN_CANDIDATES else ""
    raise InvalidArgument(
        f"ambiguous id prefix {prefix!r} matches {named}{more}: give more of the {kind} id"
    )
