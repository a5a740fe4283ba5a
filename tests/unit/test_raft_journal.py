"""The durable Raft journal on its own: what survives a reopen, torn tails,
Raft's truncate-only-on-conflict rule, compaction, group commit, and
commands evicted from memory reading back as they were added."""

from __future__ import annotations

import errno
import json
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any, NoReturn

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pysyncobj.journal import FileJournal

from cortex.raft.journal import (
    _READ_WINDOW,
    LOG_FILE,
    META_FILE,
    PREALLOCATE_BYTES,
    Disk,
    DurableJournal,
    journal_last_index,
    migrate_legacy_journal,
)


class Fault(Exception):
    pass


def _raise(what: str, err: BaseException) -> NoReturn:
    raise Fault(f"{what}: {err}")


def _journal(path: Path, applied: int = 0, sync: bool = True) -> DurableJournal:
    return DurableJournal(str(path), sync=sync, applied_index=lambda: applied, on_fault=_raise)


def _entries(journal: DurableJournal) -> list[tuple[bytes, int, int]]:
    return [journal[i] for i in range(len(journal))]


def test_entries_term_and_vote_survive_a_reopen(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for index in range(1, 6):
        journal.add(f"cmd{index}".encode(), index, 1 + index // 3)
    journal.setCurrentTerm(4, "127.0.0.1:7101")
    journal.sync()
    journal._destroy()

    again = _journal(tmp_path)
    assert _entries(again) == [(f"cmd{i}".encode(), i, 1 + i // 3) for i in range(1, 6)]
    assert again.getCurrentTerm() == 4
    assert again.getVotedForNodeId() == "127.0.0.1:7101"
    assert journal_last_index(str(tmp_path)) == 5


def test_term_and_vote_are_stored_before_set_current_term_returns(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.setCurrentTerm(7, "n2")
    meta = json.loads((tmp_path / META_FILE).read_text())
    assert (meta["term"], meta["voted_for"]) == (7, "n2")


def test_one_sync_covers_every_append_since_the_last(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for index in range(1, 4):
        journal.add(b"x", index, 1)
    assert journal.dirty
    journal.sync()
    journal.sync()  # nothing new: no second fdatasync
    journal.add(b"y", 4, 1)
    journal.sync()
    stats = journal.stats()
    assert (stats.syncs, stats.synced_entries) == (2, 4)
    assert not journal.dirty


class _SlowDisk(Disk):
    """A disk whose every fdatasync takes at least `SECONDS`."""

    SECONDS = 0.01

    def fdatasync(self, fd: int) -> None:
        time.sleep(self.SECONDS)
        super().fdatasync(fd)


def test_each_sync_tells_how_long_the_disk_took(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.disk = _SlowDisk()
    heard: list[float] = []
    journal.on_sync = heard.append
    journal.add(b"x", 1, 1)
    journal.sync()
    journal.sync()  # nothing new: no fdatasync, nothing to tell
    journal.add(b"y", 2, 1)
    journal.sync()
    assert len(heard) == journal.stats().syncs == 2
    assert all(seconds >= _SlowDisk.SECONDS for seconds in heard), heard

    unsynced = _journal(tmp_path / "unsynced", sync=False)
    unsynced.on_sync = heard.append
    unsynced.add(b"x", 1, 1)
    unsynced.sync()
    assert len(heard) == 2


def test_without_sync_nothing_is_synced(tmp_path: Path) -> None:
    journal = _journal(tmp_path, sync=False)
    journal.add(b"x", 1, 1)
    journal.sync()
    assert journal.stats().syncs == 0
    assert not journal.dirty


def _tear(path: Path, end: int, count: int, zeros_after: bool) -> None:
    """The record ending at `end` loses its last `count` bytes, as in a crash
    while it was written: the file ends there, or (grown ahead) holds zeros
    from there on."""
    data = path.read_bytes()
    if zeros_after:
        path.write_bytes(data[: end - count] + bytes(len(data) - end + count))
    else:
        path.write_bytes(data[: end - count])


@pytest.mark.parametrize("zeros_after", [False, True])
def test_a_torn_record_at_the_end_is_cut_off(tmp_path: Path, zeros_after: bool) -> None:
    journal = _journal(tmp_path)
    for index in range(1, 4):
        journal.add(b"payload-%d" % index, index, 1)
    journal.sync()
    end = journal.size_bytes
    journal._destroy()
    _tear(tmp_path / LOG_FILE, end, 3, zeros_after)  # the last record lost its tail

    again = _journal(tmp_path)
    assert [index for _, index, _ in _entries(again)] == [1, 2]
    again.add(b"payload-3b", 3, 2)
    again.sync()
    again._destroy()
    assert [e[1:] for e in _entries(_journal(tmp_path))] == [(1, 1), (2, 1), (3, 2)]


@pytest.mark.parametrize("window", [24, 64, 1000, 1 << 20])
def test_a_journal_read_a_window_at_a_time_reopens_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """A node starting reads its journal a window at a time: records smaller
    and larger than the window, and across its edges, come back whole, and a
    torn tail is still cut off."""
    monkeypatch.setattr("cortex.raft.journal._READ_WINDOW", window)
    journal = _journal(tmp_path)
    written = [(bytes([index % 251]) * (index * 37 % 301), index, 1) for index in range(1, 40)]
    for command, index, term in written:
        journal.add(command, index, term)
    journal.sync()
    end = journal.size_bytes
    journal._destroy()
    assert journal_last_index(str(tmp_path)) == 39
    assert _entries(_journal(tmp_path)) == written
    _tear(tmp_path / LOG_FILE, end, 5, zeros_after=True)
    assert journal_last_index(str(tmp_path)) == 38
    assert _entries(_journal(tmp_path)) == written[:-1]


def test_finding_the_last_index_reads_a_window_at_a_time(tmp_path: Path) -> None:
    """The start-up check of the journal's end holds at most a window and a
    record in memory, however large the journal (it read the whole file)."""
    journal = _journal(tmp_path)
    for index in range(1, 41):
        journal.add(bytes([index]) * (1 << 20), index, 1)
    journal.sync()
    journal._destroy()
    tracemalloc.start()
    try:
        assert journal_last_index(str(tmp_path)) == 40
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * _READ_WINDOW, peak


def test_a_corrupt_record_and_what_follows_are_cut_off(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for index in range(1, 4):
        journal.add(b"payload-%d" % index, index, 1)
    end = journal.size_bytes
    journal._destroy()
    path = tmp_path / LOG_FILE
    data = bytearray(path.read_bytes())
    data[end - 1] ^= 0xFF  # the last byte of the last record
    path.write_bytes(bytes(data))
    assert [index for _, index, _ in _entries(_journal(tmp_path))] == [1, 2]


def test_the_file_is_grown_ahead_in_zeros_which_a_reopen_keeps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Appends overwrite zeros the file already holds (their syncs then write
    the data alone); the zeros after the last record are no torn record."""
    journal = _journal(tmp_path)
    path = tmp_path / LOG_FILE
    journal.add(b"first", 1, 1)
    journal.sync()
    grown = path.stat().st_size
    assert grown >= journal.size_bytes + 64 * 1024
    for index in range(2, 50):
        journal.add(b"e%d" % index, index, 1)
    journal.sync()
    assert path.stat().st_size == grown  # written into the zeros, not past them
    journal._destroy()
    with caplog.at_level("WARNING", logger="cortex.raft.journal"):
        again = _journal(tmp_path)
    assert [index for _, index, _ in _entries(again)] == list(range(1, 50))
    assert path.stat().st_size == grown
    assert not [r for r in caplog.records if "torn" in r.getMessage()]
    again.add(b"e50", 50, 1)
    again._destroy()
    assert [index for _, index, _ in _entries(_journal(tmp_path))] == list(range(1, 51))


def test_the_file_grows_ahead_by_as_much_as_it_holds_up_to_a_bound(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    path = tmp_path / LOG_FILE
    command = b"x" * (256 * 1024)
    for index in range(1, 41):  # 10 MiB of records
        journal.add(command, index, 1)
        ahead = path.stat().st_size - journal.size_bytes
        assert 0 <= ahead <= max(journal.size_bytes, PREALLOCATE_BYTES)
    assert path.stat().st_size - journal.size_bytes <= PREALLOCATE_BYTES
    journal._destroy()


def test_a_disk_without_room_for_the_zeros_still_takes_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = _journal(tmp_path)
    path = tmp_path / LOG_FILE
    index = 1
    journal.add(b"first", index, 1)
    grown = path.stat().st_size
    while journal.size_bytes + 1100 < grown:  # records into the zeros
        index += 1
        journal.add(b"y" * 1000, index, 1)
    # The disk has room for 3000 bytes past the file: a record, not the zeros.
    room = grown + 3000
    write = os.pwrite

    def full_past_room(fd: int, data: Any, offset: int) -> int:
        if offset + len(data) > room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", full_past_room)
    journal.add(b"past", index + 1, 1)
    journal.add(b"w" * 1500, index + 2, 1)
    with pytest.raises(Fault, match="appending raft index"):
        journal.add(b"z" * 4000, index + 3, 1)  # no room for the record itself
    monkeypatch.setattr(os, "pwrite", write)
    journal.sync()
    journal._destroy()
    assert [i for _, i, _ in _entries(_journal(tmp_path))] == list(range(1, index + 3))


def test_without_sync_the_file_is_not_grown_ahead(tmp_path: Path) -> None:
    journal = _journal(tmp_path, sync=False)
    journal.add(b"x", 1, 1)
    assert (tmp_path / LOG_FILE).stat().st_size == journal.size_bytes
    journal._destroy()


def test_reappending_the_same_entries_after_a_truncation_rewrites_nothing(tmp_path: Path) -> None:
    journal = _journal(tmp_path, applied=5)
    for index in range(1, 8):
        journal.add(b"e%d" % index, index, 1)
    journal.sync()
    before = (tmp_path / LOG_FILE).read_bytes()
    # pysyncobj truncates a follower on any overlapping append, then appends
    # the same entries again: applied ones included, no conflict.
    journal.deleteEntriesFrom(2)
    assert len(journal) == 2
    for index in range(3, 6):
        journal.add(b"e%d" % index, index, 1)
    assert not journal.dirty
    assert (tmp_path / LOG_FILE).read_bytes() == before
    journal._destroy()
    # The file still holds entries 6 and 7, which nothing replaced.
    assert [index for _, index, _ in _entries(_journal(tmp_path))] == list(range(1, 8))


def test_a_conflicting_entry_cuts_the_file_there(tmp_path: Path) -> None:
    journal = _journal(tmp_path, applied=2)
    for index in range(1, 6):
        journal.add(b"old", index, 1)
    journal.sync()
    journal.deleteEntriesFrom(3)
    journal.add(b"new", 4, 2)
    journal.sync()
    journal._destroy()
    assert _entries(_journal(tmp_path)) == [(b"old", 1, 1), (b"old", 2, 1), (b"old", 3, 1),
                                            (b"new", 4, 2)]  # fmt: skip


def test_replacing_an_applied_entry_is_a_divergence_fault(tmp_path: Path) -> None:
    journal = _journal(tmp_path, applied=4)
    for index in range(1, 6):
        journal.add(b"old", index, 1)
    journal.deleteEntriesFrom(2)
    with pytest.raises(Fault, match="diverged"):
        journal.add(b"new", 3, 2)


def test_compaction_keeps_the_tail_and_survives_a_reopen(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for index in range(1, 11):
        journal.add(b"c%d" % index, index, 1)
    journal.deleteEntriesFrom(8)  # 9 and 10 stay in the file only
    journal.deleteEntriesTo(5)
    assert [index for _, index, _ in _entries(journal)] == [6, 7, 8]
    journal.add(b"c9", 9, 1)
    journal.add(b"c11", 10, 2)  # conflicts with the file's 10
    journal._destroy()
    assert [e[1:] for e in _entries(_journal(tmp_path))] == [(6, 1), (7, 1), (8, 1), (9, 1),
                                                             (10, 2)]  # fmt: skip
    assert not (tmp_path / (LOG_FILE + ".compact")).exists()


def test_clear_drops_everything(tmp_path: Path) -> None:
    journal = _journal(tmp_path, applied=3)
    for index in range(1, 4):
        journal.add(b"x", index, 1)
    journal.clear()
    journal.add(b"p", 10, 3)
    journal.add(b"l", 11, 3)
    journal._destroy()
    assert [e[1:] for e in _entries(_journal(tmp_path))] == [(10, 3), (11, 3)]


def test_drop_before_compacts_to_the_snapshot_boundary(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for index in range(1, 6):
        journal.add(b"x", index, 1)
    assert journal.drop_before(3, 1)
    assert [index for _, index, _ in _entries(journal)] == [3, 4, 5]
    assert not journal.drop_before(9, 1)


def test_the_stored_commit_index_never_passes_the_synced_journal(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.add(b"x", 1, 1)
    journal.add(b"y", 2, 1)
    journal.setRaftCommitIndex(2)
    journal.onOneSecondTimer()  # syncs first, then stores
    assert json.loads((tmp_path / META_FILE).read_text())["commit_index"] == 2
    assert journal.stats().syncs == 1


def test_a_write_error_is_a_fault_not_a_lost_entry(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    os.close(journal._fd)
    journal._fd = os.open(os.devnull, os.O_RDONLY)
    with pytest.raises(Fault, match="appending raft index 1"):
        journal.add(b"x", 1, 1)


def test_a_journal_of_pysyncobj_s_own_format_is_converted(tmp_path: Path) -> None:
    legacy = FileJournal(str(tmp_path / "raft.journal"))
    for index in range(1, 4):
        legacy.add(b"old%d" % index, index, 2)
    legacy.setCurrentTerm(5, "127.0.0.1:7102")
    legacy.setRaftCommitIndex(3)
    legacy.onOneSecondTimer()
    legacy._destroy()

    assert migrate_legacy_journal(str(tmp_path))
    assert not migrate_legacy_journal(str(tmp_path))
    journal = _journal(tmp_path)
    assert _entries(journal) == [(b"old%d" % i, i, 2) for i in range(1, 4)]
    assert (journal.getCurrentTerm(), journal.getVotedForNodeId()) == (5, "127.0.0.1:7102")
    assert journal.getRaftCommitIndex() == 3
    assert (tmp_path / "raft.journal.migrated").exists()


# -- commands kept in memory or read back from the file --------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 300), st.booleans()),
        st.tuples(st.just("truncate"), st.integers(0, 40)),
        st.tuples(st.just("compact"), st.integers(0, 40)),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("clear")),
    ),
    max_size=60,
)


@settings(deadline=None, max_examples=150)
@given(OPS)
def test_evicted_commands_read_back_as_they_were_added(tmp_path_factory: Any, ops: Any) -> None:
    """With room for only a few commands in memory, every entry, and every
    slice pysyncobj takes, reads back exactly as added, through truncations,
    re-appends of a different term, compactions, clears and reopens."""
    path = tmp_path_factory.mktemp("hot")
    journal = DurableJournal(str(path), on_fault=_raise, hot_bytes=64)
    model: list[tuple[bytes, int, int]] = []
    written: dict[tuple[int, int], bytes] = {}
    serial = 0
    for op in ops:
        if op[0] == "add":
            serial += 1
            index = model[-1][1] + 1 if model else 1
            term = (model[-1][2] if model else 1) + (1 if op[2] else 0)
            # Raft: one index and term is one entry, whenever it is sent again.
            command = written.setdefault(
                (index, term), f"{serial}:".encode() + bytes([serial % 256]) * op[1]
            )
            journal.add(command, index, term)
            model.append((command, index, term))
        elif op[0] == "truncate" and model:
            keep = min(op[1], len(model) - 1)
            journal.deleteEntriesFrom(keep)
            del model[keep:]
        elif op[0] == "compact" and model:
            drop = min(op[1], len(model) - 1)
            journal.deleteEntriesTo(drop)
            del model[:drop]
        elif op[0] == "reopen":
            journal._destroy()
            journal = DurableJournal(str(path), on_fault=_raise, hot_bytes=64)
            # What was truncated but not replaced is still in the file.
            reopened = _entries(journal)
            assert reopened[: len(model)] == model
            model = reopened
        elif op[0] == "clear":
            journal.clear()
            model = []
        assert len(journal) == len(model)
        assert _entries(journal) == model
        assert list(journal[0:]) == model
        assert journal[2:5][0:2] == model[2:5][0:2]
        if model:
            assert journal[-1] == model[-1]
        kept = sum(len(c) for c in journal._commands if c is not None)
        assert kept <= max(64, len(model[-1][0]) if model else 0)
    journal._destroy()
