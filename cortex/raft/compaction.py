"""When the Raft log is compacted.

Every compaction writes a snapshot holding the whole state database. pysyncobj
compacts after `compaction_min_entries` entries or `compaction_min_time_s`
seconds, however large the database and however little those entries add:
with a million finished tasks (gigabytes of database) a node would copy the
whole state every few minutes, and a busy cluster spends its disk on
snapshots instead of work. So once the last snapshot is past a floor,
compaction also waits until the journal since it is at least `ratio` times
the snapshot's size (as Redis rewrites its append-only file once it has
grown by a share of its size at the last rewrite): snapshot writes then stay
within a fixed multiple of what the journal writes, whatever the state's
size. Measured against the snapshot, not the live database, the journal
always gets there, even while the state grows as fast as the journal does.
The journal this keeps is read on restart (CRC checked, not applied again)
and serves a lagging follower entries instead of a whole snapshot.

The nodes of a cluster grow their journals alike, so they would all reach
that share at the same moment and copy their state at once: every member of
every quorum slowed by its copy together, instead of one at a time while the
others commit. Each node waits for a share of its own between `ratio` and
`ratio * (1 + spread)`, by its place among the voters, so they take turns;
below the floor, for as much more of pysyncobj's entries and seconds."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

# Below this size a snapshot is small enough to write at every compaction.
DEFAULT_FLOOR_BYTES = 64 * 1024**2
# pysyncobj's thresholds while compaction is held back: never reached.
_HELD_ENTRIES = 2**62
_HELD_SECONDS = 1e15
CHECK_INTERVAL_S = 1.0


class Sized(Protocol):
    @property
    def size_bytes(self) -> int: ...


@dataclass(frozen=True)
class CompactionPolicy:
    min_entries: int
    min_time_s: float
    # The journal a compaction waits for, as a fraction of the last
    # snapshot's size (0: no wait).
    log_ratio: float = 0.5
    floor_bytes: int = DEFAULT_FLOOR_BYTES
    # How much more of the snapshot's size a node may wait for than
    # `log_ratio` (a share of it), where `held`'s `place` says.
    spread: float = 0.25

    def held(self, journal_bytes: int, snapshot_bytes: int, place: float = 0.0) -> bool:
        """Whether compaction waits for the journal to grow (never before
        the first snapshot: `snapshot_bytes` 0); `place`, from 0 to 1, is
        where in the spread this node's wait ends."""
        ratio = self.log_ratio * self.stretch(place)
        return (
            self.log_ratio > 0
            and snapshot_bytes >= self.floor_bytes
            and journal_bytes < ratio * snapshot_bytes
        )

    def stretch(self, place: float) -> float:
        """How much longer than the first in the spread a node at `place` waits."""
        return 1 + self.spread * place


class CompactionGate:
    """Sets pysyncobj's compaction thresholds (`conf`, read on every tick) to
    the policy's, or out of reach while the policy holds compaction back.
    `tick` runs on the Raft thread (pysyncobj's on-tick callback) and looks
    at the files at most once per `CHECK_INTERVAL_S` of `clock`. `place`
    gives this node's place in the spread, from 0 to 1 (its rank among the
    voters over their number)."""

    def __init__(
        self,
        conf: Any,
        policy: CompactionPolicy,
        journal: Sized,
        snapshot_path: str,
        clock: Callable[[], float],
        place: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self._conf = conf
        self.policy = policy
        self._journal = journal
        self._snapshot_path = snapshot_path
        self._clock = clock
        self._place = place
        self._next_check = 0.0
        self.held = False
        # Looks at the files so far (tests wait on it).
        self.checks = 0
        # Judged from the files before pysyncobj first looks: a node
        # restarting next to a large snapshot must not compact at once (its
        # first tick finds the time since the last compaction unknown).
        self._set(held=False)
        self._check()
        self._next_check = clock() + CHECK_INTERVAL_S

    def tick(self) -> None:
        now = self._clock()
        if now < self._next_check:
            return
        self._next_check = now + CHECK_INTERVAL_S
        self._check()

    def _check(self) -> None:
        try:
            snapshot_bytes = os.path.getsize(self._snapshot_path)
        except FileNotFoundError:
            snapshot_bytes = 0
        except OSError:
            return
        place = self._place()
        self._set(self.policy.held(self._journal.size_bytes, snapshot_bytes, place), place)
        self.checks += 1

    def _set(self, held: bool, place: float = 0.0) -> None:
        self.held = held
        stretch = self.policy.stretch(place)
        self._conf.logCompactionMinEntries = (
            _HELD_ENTRIES if held else round(self.policy.min_entries * stretch)
        )
        self._conf.logCompactionMinTime = (
            _HELD_SECONDS if held else self.policy.min_time_s * stretch
        )
