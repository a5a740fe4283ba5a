"""Ids made close in time that sit close together in an index, yet whose
short prefixes still tell them apart: UUIDs (version 8, RFC 9562's layout of
one's own) whose first 12 bits count tenths of a second modulo 4,096 (the
count goes round every 409.6 s) and whose other 110 bits are random (the
version and variant take 6).

A task's id keys the task table's primary-key index and the events' by-task
index; an idempotency key keys the submissions table. Random keys put every
new row on a page of its own in those indexes, a page SQLite writes to the
WAL at commit and checkpoints later: with 50 tasks to a Raft entry, 50 pages
per index. Ids made in the same tenth of a second share their first three
characters, so the rows one entry writes land among the few index entries
with that prefix (a 4,096th of the index: three pages at a million tasks).

Three characters are all ids share: from the fourth on, an id is as random as
a version 4 UUID, so a prefix that is unique among a million random ids is,
as near as makes no difference, unique among a million of these."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable

_TENTHS_BITS = 12
_RANDOM_BITS = 128 - _TENTHS_BITS
_VERSION = 8
# The version's four bits and the variant's two (0b10), as RFC 9562 places them.
_VERSION_MASK = (0xF << 76) | (0x3 << 62)
_VERSION_BITS = (_VERSION << 76) | (0x2 << 62)


def time_local(seconds: float, random_bits: int) -> uuid.UUID:
    """The id made at `seconds` (since the epoch) from `random_bits` (any
    int: its low 116 bits are used, less the 6 the version and variant take)."""
    tenths = int(seconds * 10) % (1 << _TENTHS_BITS)
    value = (tenths << _RANDOM_BITS) | (random_bits & ((1 << _RANDOM_BITS) - 1))
    return uuid.UUID(int=(value & ~_VERSION_MASK) | _VERSION_BITS)


class OsRandomness:
    """Random bytes (`draw`) and UUIDs (version 4, as `uuid.uuid4` makes
    them) from the operating system's randomness, read 4 KB at a time instead
    of a few bytes per id. `os.urandom` is a system call that lets go of the
    GIL, and a node makes about three ids and three trace or span ids per
    task: on a busy node each one is a thread switch to win the GIL back (a
    submission waited 63 µs for each of its two, 32 clients submitting). The
    bytes are the same kind either way. A child process made by `fork` drops
    the bytes it inherited unread, so it never makes its parent's ids."""

    CHUNK = 4096

    def __init__(self, read: Callable[[int], bytes] = os.urandom) -> None:
        self._read = read
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        # A new lock too: in a forked child, a thread that held the old one
        # does not exist.
        self._lock = threading.Lock()
        self._buffer = b""
        self._at = 0

    def draw(self, count: int) -> bytes:
        """`count` random bytes (at most `CHUNK`), none drawn before."""
        if not 0 < count <= self.CHUNK:
            raise ValueError(f"draw 1 to {self.CHUNK} bytes at a time, not {count}")
        with self._lock:
            if self._at + count > len(self._buffer):
                self._buffer, self._at = self._read(self.CHUNK), 0
            drawn = self._buffer[self._at : self._at + count]
            self._at += count
        return drawn

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.draw(16), version=4)


# The one every id of this process comes from.
OS_RANDOMNESS = OsRandomness()


def new_time_local_id() -> str:
    """A fresh id made now, from the operating system's randomness."""
    return str(time_local(time.time(), OS_RANDOMNESS.uuid4().int))
