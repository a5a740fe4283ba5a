"""Time-local ids (`cortex.ids`): ids made in the same tenth of a second
share their first three characters and no more than random ids would; they
stay valid UUIDs."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.client.requests import new_idempotency_key
from cortex.ids import OsRandomness, new_time_local_id, time_local
from cortex.state import entries as e

# A day in 2026, in seconds since the epoch, and a round of the count.
DAY = 1_795_000_000.0
ROUND_S = 409.6

random_bits = st.integers(min_value=0, max_value=(1 << 128) - 1)


@given(bits=random_bits, seconds=st.floats(min_value=0, max_value=4e9))
def test_an_id_is_a_version_8_uuid_that_keeps_its_random_bits(bits: int, seconds: float) -> None:
    made = time_local(seconds, bits)
    assert made.version == 8
    assert made.variant == uuid.RFC_4122
    assert uuid.UUID(str(made)) == made
    kept = ((1 << 116) - 1) & ~((0xF << 76) | (0x3 << 62))
    assert made.int & kept == bits & kept


@given(tenth=st.integers(min_value=0, max_value=4095), a=random_bits, b=random_bits)
def test_ids_made_in_one_tenth_share_three_characters(tenth: int, a: int, b: int) -> None:
    start = DAY - DAY % ROUND_S + tenth / 10 + 0.01
    assert str(time_local(start, a))[:3] == str(time_local(start + 0.05, b))[:3]


def test_the_prefix_counts_tenths_and_goes_round_every_409_6_seconds() -> None:
    start = DAY - DAY % ROUND_S + 0.01
    prefixes = [str(time_local(start + k / 10, 0))[:3] for k in range(4097)]
    assert prefixes[:3] == ["000", "001", "002"]
    assert prefixes[4095] == "fff"
    assert prefixes[4096] == "000"
    assert prefixes[:4096] == sorted(prefixes[:4096])


def test_prefixes_of_a_burst_are_as_unique_as_random_ids_past_the_shared_three() -> None:
    """A thousand ids made in one tenth: their four-character prefixes spread
    over the sixteen values of the fourth character, and eight characters name
    each of them (as for random ids, the odds of two sharing five random
    characters are a thousand squared over two million)."""
    rng = random.Random(7)
    burst = [str(time_local(DAY, rng.getrandbits(128))) for _ in range(1000)]
    assert len({made[:3] for made in burst}) == 1
    assert len({made[:4] for made in burst}) == 16
    assert len({made[:8] for made in burst}) == 1000


def test_tasks_workflows_and_default_idempotency_keys_get_fresh_time_local_ids() -> None:
    made = [e.new_id(), new_time_local_id(), new_idempotency_key().removeprefix("client-")]
    assert len(set(made)) == 3
    assert all(uuid.UUID(value).version == 8 for value in made)


def test_random_uuids_come_from_the_os_a_chunk_at_a_time() -> None:
    """Version 4 UUIDs as `uuid.uuid4` makes them, sixteen bytes of one read
    each: 256 ids per 4 KB read, none repeated, from threads at once."""
    reads: list[int] = []

    def counted(size: int) -> bytes:
        reads.append(size)
        return os.urandom(size)

    source = OsRandomness(counted)
    made: list[uuid.UUID] = []

    def draw() -> None:
        made.extend(source.uuid4() for _ in range(1000))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(made)) == 4000
    assert all(u.version == 4 and u.variant == uuid.RFC_4122 for u in made)
    assert reads == [OsRandomness.CHUNK] * -(-4000 * 16 // OsRandomness.CHUNK)


_FORKED = """
import os, sys
from cortex.ids import OsRandomness
source = OsRandomness()
source.uuid4()  # the buffer holds unread bytes, which the child inherits
read_end, write_end = os.pipe()
child = os.fork()
if child == 0:
    os.write(write_end, " ".join(source.uuid4().hex for _ in range(8)).encode())
    os._exit(0)
os.close(write_end)
with os.fdopen(read_end) as pipe:
    in_child = pipe.read()
os.waitpid(child, 0)
print(in_child)
print(" ".join(source.uuid4().hex for _ in range(8)))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_makes_its_parents_ids() -> None:
    # In a process of its own: forking the test runner, threads and all, is not safe.
    done = subprocess.run(
        [sys.executable, "-c", _FORKED], capture_output=True, text=True, timeout=60, check=True
    )
    in_child, in_parent = (set(line.split()) for line in done.stdout.splitlines())
    assert len(in_child) == 8 and len(in_parent) == 8
    assert not in_child & in_parent


def test_random_bytes_come_from_the_same_chunks_and_are_never_drawn_twice() -> None:
    """`draw` takes what `uuid4` takes from (a read whenever the chunk runs
    out), and refuses a draw larger than a chunk."""
    reads: list[int] = []

    def counted(size: int) -> bytes:
        reads.append(size)
        return os.urandom(size)

    source = OsRandomness(counted)
    drawn = [source.draw(8) for _ in range(1000)] + [source.draw(16) for _ in range(500)]
    assert all(len(b) == 8 for b in drawn[:1000]) and all(len(b) == 16 for b in drawn[1000:])
    assert len(set(drawn)) == 1500
    assert len(reads) <= -(-(1000 * 8 + 500 * 16) // OsRandomness.CHUNK) + 1
    with pytest.raises(ValueError, match="1 to 4096 bytes"):
        source.draw(OsRandomness.CHUNK + 1)
