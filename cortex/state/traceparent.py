"""W3C trace context (`traceparent`) as tasks and workflows keep it: parsed
from what a client sends, made afresh when it sends none, and checked in
entries. Stored always in version 00 form, lower-case:
`00-<trace id: 32 hex>-<parent id: 16 hex>-<flags: 2 hex>`.

A malformed value is ignored, as the W3C recommendation asks of a receiver
(the submission then starts a trace of its own): a client's tracing
problem never refuses its task."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cortex.ids import OS_RANDOMNESS

# Any version: the four fields a version 00 header has, then, beyond
# version 00 only, more fields after a dash.
_HEADER = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_STORED = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
SAMPLED = 0x01
# Longest header value looked at: a future version may add fields, a
# header beyond this is not a trace context.
MAX_HEADER_CHARS = 512


@dataclass(frozen=True)
class TraceParent:
    trace_id: str
    span_id: str
    flags: int = SAMPLED

    @classmethod
    def parse(cls, text: str | None) -> TraceParent | None:
        """The trace context a `traceparent` header holds, or None when it
        holds none: missing, malformed, upper-case hex, version ff, or an
        all-zero trace or parent id."""
        if not text or len(text) > MAX_HEADER_CHARS:
            return None
        match = _HEADER.fullmatch(text.strip(" \t"))
        if match is None:
            return None
        version, trace_id, span_id, flags, rest = match.groups()
        if version == "ff" or (version == "00" and rest is not None):
            return None
        if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
            return None
        return cls(trace_id, span_id, int(flags, 16))

    @classmethod
    def new(cls) -> TraceParent:
        """The root of a new trace, sampled (so a task's own spans are kept)."""
        return cls(_random_hex(16, _ZERO_TRACE), _random_hex(8, _ZERO_SPAN), SAMPLED)

    def child(self) -> TraceParent:
        """A context in the same trace whose parent is this one."""
        return TraceParent(self.trace_id, _random_hex(8, _ZERO_SPAN), self.flags)

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    def __str__(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags:02x}"


def is_stored_form(text: str) -> bool:
    """Whether `text` is a traceparent in the form tasks and workflows keep."""
    return (
        _STORED.fullmatch(text) is not None
        and text[3:35] != _ZERO_TRACE
        and text[36:52] != _ZERO_SPAN
    )


def _random_hex(size: int, zero: str) -> str:
    while True:
        value = OS_RANDOMNESS.draw(size).hex()
        if value != zero:
            return value
