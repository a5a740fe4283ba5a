"""W3C traceparent as tasks and workflows keep it: what a client's header
may hold, the form stored, and fresh contexts. A malformed header is
ignored (None), never an error: the submission starts a trace of its own."""

from __future__ import annotations

import os

import pytest

from cortex.state.traceparent import MAX_HEADER_CHARS, TraceParent, is_stored_form

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
HEADER = f"00-{TRACE}-{SPAN}-01"


def test_a_version_00_header_round_trips() -> None:
    parsed = TraceParent.parse(HEADER)
    assert parsed == TraceParent(TRACE, SPAN, 0x01)
    assert parsed.sampled
    assert str(parsed) == HEADER
    assert is_stored_form(str(parsed))


def test_flags_are_kept_and_unsampled_is_told_apart() -> None:
    parsed = TraceParent.parse(f"00-{TRACE}-{SPAN}-00")
    assert parsed is not None and not parsed.sampled
    assert str(parsed).endswith("-00")
    assert str(TraceParent.parse(f"00-{TRACE}-{SPAN}-03")).endswith("-03")


def test_surrounding_blanks_are_allowed() -> None:
    assert TraceParent.parse(f" \t{HEADER} ") == TraceParent(TRACE, SPAN, 1)


def test_a_later_version_is_read_by_its_first_four_fields_and_stored_as_00() -> None:
    parsed = TraceParent.parse(f"cc-{TRACE}-{SPAN}-01-what-comes-later")
    assert parsed == TraceParent(TRACE, SPAN, 1)
    assert str(parsed) == HEADER
    assert TraceParent.parse(f"cc-{TRACE}-{SPAN}-01") == parsed


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "not a traceparent",
        f"00-{TRACE}-{SPAN}",  # no flags
        f"00-{TRACE}-{SPAN}-01-",  # version 00 has exactly four fields
        f"00-{TRACE}-{SPAN}-01-extra",
        f"ff-{TRACE}-{SPAN}-01",  # version ff is invalid
        f"00-{TRACE.upper()}-{SPAN}-01",  # hex must be lower-case
        f"00-{TRACE}-{SPAN.upper()}-01",
        f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"00-{TRACE[:-1]}-{SPAN}-01",  # a field too short
        f"00-{TRACE}x-{SPAN}-01",
        f"00_{TRACE}_{SPAN}_01",
        f"0-{TRACE}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}-1",
        f"00-{TRACE}-{SPAN}-0g",
        f"cc-{TRACE}-{SPAN}-01x",  # a later version's extra fields start with a dash
        f"cc-{TRACE}-{SPAN}-01-" + "x" * MAX_HEADER_CHARS,  # far too long
        f"00-{TRACE}-{SPAN}-01\n",
    ],
)
def test_malformed_headers_hold_no_context(header: str | None) -> None:
    assert TraceParent.parse(header) is None


def test_new_contexts_are_sampled_roots_of_distinct_traces() -> None:
    first, second = TraceParent.new(), TraceParent.new()
    assert first.sampled and is_stored_form(str(first))
    assert first.trace_id != second.trace_id and first.span_id != second.span_id
    assert TraceParent.parse(str(first)) == first


def test_a_child_stays_in_its_trace_with_a_span_id_of_its_own() -> None:
    parent = TraceParent(TRACE, SPAN, 0)
    child = parent.child()
    assert (child.trace_id, child.flags) == (TRACE, 0)
    assert child.span_id != SPAN and is_stored_form(str(child))


@pytest.mark.parametrize(
    "text",
    [
        f"cc-{TRACE}-{SPAN}-01",  # stored only as version 00
        f" {HEADER}",
        f"00-{TRACE.upper()}-{SPAN}-01",
        f"00-{'0' * 32}-{SPAN}-01",
        f"00-{TRACE}-{'0' * 16}-01",
        f"{HEADER}-",
        "",
    ],
)
def test_only_the_canonical_form_is_stored(text: str) -> None:
    assert not is_stored_form(text)


def test_fresh_contexts_do_not_make_a_system_call_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trace and span ids come from the process's buffered randomness
    (`cortex.ids.OS_RANDOMNESS`), not one `os.urandom` call each: that call
    lets go of the GIL, and on a busy node winning it back is a thread switch."""
    calls: list[int] = []
    real = os.urandom

    def counted(size: int) -> bytes:
        calls.append(size)
        return real(size)

    monkeypatch.setattr(os, "urandom", counted)
    made = [TraceParent.new() for _ in range(200)]
    children = [context.child() for context in made]
    assert calls == []
    assert len({c.trace_id for c in made}) == 200
    assert len({c.span_id for c in made + children}) == 400
    assert all(is_stored_form(str(c)) for c in made + children)
