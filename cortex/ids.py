"""Ids that sort by when they were made: UUIDs (version 8, RFC 9562's layout
of one's own) whose first 24 bits count tenths of a second since the epoch,
modulo 2^24 (the count wraps every 19.4 days), and whose other 98 bits are
random (the version and variant take 6).

A task's id keys the task table's primary-key index and the events' by-task
index; an idempotency key keys the submissions table. Random keys put every
new row on its own page of those indexes, which SQLite writes to the WAL at
commit and later checkpoints: with 50 tasks to a Raft entry, one page per task
per index. Ids made in the same tenth of a second share their first six
characters, so the rows a busy second writes land on a few pages at the
index's growing edge. Ids made a few seconds apart still differ within the
first six characters, so a short prefix (the CLI shows eight) names one."""

from __future__ import annotations

import time
import uuid

_TENTHS_BITS = 24
_RANDOM_BITS = 128 - _TENTHS_BITS
_VERSION = 8
# The version's four bits and the variant's two (0b10), as RFC 9562 places them.
_VERSION_MASK = (0xF << 76) | (0x3 << 62)
_VERSION_BITS = (_VERSION << 76) | (0x2 << 62)


def time_ordered(seconds: float, random_bits: int) -> uuid.UUID:
    """The id made at `seconds` (since the epoch) from `random_bits` (any
    int: its low 104 bits are used, less the 6 the version and variant take)."""
    tenths = int(seconds * 10) % (1 << _TENTHS_BITS)
    value = (tenths << _RANDOM_BITS) | (random_bits & ((1 << _RANDOM_BITS) - 1))
    return uuid.UUID(int=(value & ~_VERSION_MASK) | _VERSION_BITS)


def new_time_ordered_id() -> str:
    """A fresh id made now, from the operating system's randomness."""
    return str(time_ordered(time.time(), uuid.uuid4().int))
