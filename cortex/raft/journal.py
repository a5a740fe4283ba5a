"""The Raft journal: pysyncobj's log entries and its term, vote and commit
index, kept durably.

pysyncobj 0.3.17's own `FileJournal` syncs nothing (an mmap never flushed,
term and vote written without fsync) and dies of SIGBUS on a full disk. This
journal implements the same `Journal` interface over plain file writes:

- Appends go to the file at once and are made durable by `sync()`, one
  `fdatasync` for everything appended since the last one (group commit).
  `DurableTransport` holds back this node's acknowledgements of appended
  entries until the sync that covers them, and syncs before the Raft thread
  goes on to commit or apply anything, so an entry counts as appended on a
  node only once it is on stable storage there, and the state machine never
  applies an entry the journal could still lose.
- Term and vote are written to their own file with fsync of the file and its
  directory before pysyncobj sends the message that reflects them.
- Every record carries a CRC, so a record torn by a crash (necessarily one
  not yet synced) is found and cut off on start.
- pysyncobj truncates a follower's log whenever an append overlaps what it
  already holds, even when nothing conflicts, and then appends the same
  entries again. The file keeps such entries and is only cut where an entry
  actually differs (Raft's rule), so a crash between the two never loses an
  entry this node acknowledged. An applied entry being replaced is a real
  divergence and stops the node.
- Compaction writes the kept tail to a new file, syncs it and renames it over
  the old one, so a crash leaves either journal whole.
- The file is grown ahead of its records with zeros (by as much as it
  already holds, 64 KiB at least and `PREALLOCATE_BYTES`, 4 MiB, at most),
  so an append overwrites blocks the file already has and its `fdatasync`
  writes the data alone. Appending past the file's end changed
  its size each time, and each sync also committed that change to the file
  system's own journal: a sync took about 1.4 times as long (219 against
  152 µs median for 1,000-byte entries on this disk,
  `scripts/bench_journal.py`). The zeros after
  the last record are not a torn record: they are kept on start, where
  anything else after it is cut off. A disk too full for the zeros gets the
  record alone.
- Only the newest entries' commands stay in memory (`hot_bytes`, 16 MB by
  default); older ones are read back from the file, CRC checked, when
  pysyncobj asks for them (a lagging follower, entries not yet applied). So
  a node's memory does not grow with the log between two compactions.

With `sync=False` the same files are written but never synced: a power loss
may lose acknowledged writes (documented as such, for throwaway clusters)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import time
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from pysyncobj.journal import Journal

from cortex.failstop import stop_node

log = logging.getLogger(__name__)

LOG_FILE = "raft.log"
META_FILE = "raft.meta"
_MAGIC = b"cortex raft log\x01"
_RECORD = struct.Struct("<IIQQ")  # command length, crc32, index, term
_COPY_CHUNK = 1 << 20
# How much of the journal is read at once when a node starts.
_READ_WINDOW = 4 << 20
# How far ahead of its records the file is grown, in zeros (module doc): as
# far as it already reaches, at least `_PREALLOCATE_MIN` and at most this,
# so a small journal stays small.
PREALLOCATE_BYTES = 4 << 20
_PREALLOCATE_MIN = 64 << 10
_ZEROS = bytes(1 << 20)

LogEntry = tuple[bytes, int, int]  # command, index, term, as pysyncobj holds them
# Bytes of commands kept in memory by default (the newest entries').
HOT_BYTES = 16 * 1024 * 1024
FaultHandler = Callable[[str, BaseException], NoReturn]


def _stop_on_storage_fault(what: str, err: BaseException) -> NoReturn:
    stop_node(
        what,
        err,
        "The Raft journal cannot be written durably, so this node must not acknowledge"
        " anything more. Fix the cause (free disk space, check the disk), then start it again:"
        " it keeps what it synced and catches up from the leader.",
    )


def _crc(index: int, term: int, command: bytes) -> int:
    return zlib.crc32(command, zlib.crc32(struct.pack("<QQ", index, term)))


def fsync_directory(path: str) -> None:
    """Makes a rename or a new file in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Disk:
    """The system calls that make writes durable. The simulator keeps track
    of what is durable itself, and skips them (`FakeSyncDisk`)."""

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def fsync_directory(self, path: str) -> None:
        fsync_directory(path)

    def fsync_file(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)


class FakeSyncDisk(Disk):
    def fsync(self, fd: int) -> None:
        pass

    def fdatasync(self, fd: int) -> None:
        pass

    def fsync_directory(self, path: str) -> None:
        pass


SYSTEM_DISK = Disk()


def write_file_durably(path: str, data: bytes, sync: bool = True, disk: Disk = SYSTEM_DISK) -> None:
    """Replaces `path` with `data` atomically: a crash leaves the old or the new
    content, never a mix; with `sync`, the new content is on stable storage when
    this returns."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            disk.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        disk.fsync_directory(os.path.dirname(os.path.abspath(path)))


@dataclass(frozen=True)
class _Record:
    index: int
    term: int
    offset: int
    end: int


class _Records:
    """Where each entry of the file is: four machine-integer arrays, 32
    bytes an entry. A list of `_Record` objects took about 300 bytes an
    entry with the tuples beside it, tens of megabytes for the hundreds of
    thousands of entries a large state's journal holds between two
    compactions."""

    __slots__ = ("index", "term", "offset", "end")

    def __init__(self) -> None:
        self.index = array("q")
        self.term = array("q")
        self.offset = array("q")
        self.end = array("q")

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, position: int) -> _Record:
        return _Record(
            self.index[position], self.term[position], self.offset[position], self.end[position]
        )

    def append(self, index: int, term: int, offset: int, end: int) -> None:
        self.index.append(index)
        self.term.append(term)
        self.offset.append(offset)
        self.end.append(end)

    def cut(self, position: int) -> None:
        """Drops the records from `position` on."""
        for column in (self.index, self.term, self.offset, self.end):
            del column[position:]

    def moved(self, position: int, shift: int) -> _Records:
        """The records from `position` on, each `shift` bytes earlier."""
        kept = _Records()
        kept.index = self.index[position:]
        kept.term = self.term[position:]
        kept.offset = array("q", (offset - shift for offset in self.offset[position:]))
        kept.end = array("q", (end - shift for end in self.end[position:]))
        return kept


@dataclass(frozen=True)
class JournalStats:
    syncs: int
    synced_entries: int


class DurableJournal(Journal):  # type: ignore[misc]
    disk: Disk = SYSTEM_DISK
    # Bytes of the newest commands kept in memory unless the caller says.
    default_hot_bytes = HOT_BYTES
    # Zeros written ahead of the records (module doc); 0: none, the file
    # grows with each record.
    preallocate_bytes = PREALLOCATE_BYTES

    def __init__(
        self,
        directory: str,
        sync: bool = True,
        applied_index: Callable[[], int] = lambda: 0,
        on_fault: FaultHandler = _stop_on_storage_fault,
        hot_bytes: int | None = None,
    ) -> None:
        self.directory = directory
        self.path = os.path.join(directory, LOG_FILE)
        self.meta_path = os.path.join(directory, META_FILE)
        self.sync_enabled = sync
        self._applied_index = applied_index
        self._on_fault = on_fault
        # What pysyncobj sees, and what the file holds: pysyncobj's log is the
        # first len(_commands) records (their index and term), the file may
        # hold more (see the module doc). An entry's command is None once
        # evicted (read back from the file).
        self._commands: list[bytes | None] = []
        self._records = _Records()
        # Commands are kept for the entries from `_hot_from` on, `_hot_size`
        # bytes in all; the ones before are read back from the file.
        self.hot_bytes = self.default_hot_bytes if hot_bytes is None else hot_bytes
        self._hot_from = 0
        self._hot_size = 0
        self._dirty = False
        self._unsynced_entries = 0
        self._syncs = 0
        self._synced_entries = 0
        self._synced_last_index = 0
        # Told the seconds of each sync of appended entries (the node's
        # `cortex_raft_journal_sync_seconds`): every entry this node
        # acknowledges, and every one it commits as leader, waits for one.
        self.on_sync: Callable[[float], None] | None = None
        self._meta: dict[str, Any] = {"term": 0, "voted_for": None, "commit_index": 1}
        self._meta_dirty = False
        # The file's size: its records, then zeros up to here.
        self._allocated = 0
        # What a power cut would leave: the log file up to here, this meta.
        self._synced_end = 0
        self._durable_meta: bytes | None = None
        try:
            os.makedirs(directory, exist_ok=True)
            self._meta.update(read_meta(self.meta_path))
            if os.path.exists(self.meta_path):
                with open(self.meta_path, "rb") as f:
                    self._durable_meta = f.read()
            self._fd = self._open_log()
        except OSError as err:
            self._on_fault("opening the Raft journal failed", err)

    # -- pysyncobj's Journal interface ------------------------------------

    def add(self, command: bytes, idx: int, term: int) -> None:
        position = len(self._commands)
        self._commands.append(command)
        self._hot_size += len(command)
        records = self._records
        if position < len(records):
            if (records.index[position], records.term[position]) != (idx, term):
                self._cut_file(position)
                self._append_record(command, idx, term)
        else:
            self._append_record(command, idx, term)
        self._evict()

    def clear(self) -> None:
        # pysyncobj clears the log for a snapshot that supersedes all of it.
        self._commands = []
        self._cut_file(0, replaced_by_leader=False)
        self._hot_from = self._hot_size = 0

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        self._unkeep(max(entryFrom, self._hot_from), len(self._commands))
        del self._commands[entryFrom:]
        self._hot_from = min(self._hot_from, len(self._commands))

    def deleteEntriesTo(self, entryTo: int) -> None:
        self._unkeep(self._hot_from, entryTo)
        self._commands = self._commands[entryTo:]
        self._rewrite_from(entryTo)
        self._hot_from = max(self._hot_from - entryTo, 0)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice):
            return _Entries(self, *item.indices(len(self._commands)))
        position = item + len(self._commands) if item < 0 else item
        if not 0 <= position < len(self._commands):
            raise IndexError("journal index out of range")
        return self._loaded(position)

    def __len__(self) -> int:
        return len(self._commands)

    # -- commands kept in memory or read back ------------------------------

    def _loaded(self, position: int) -> LogEntry:
        command = self._commands[position]
        idx, term = self._records.index[position], self._records.term[position]
        if command is not None:
            return command, idx, term
        return self._read_back(self._records[position], idx, term), idx, term

    def _read_back(self, record: _Record, idx: int, term: int) -> bytes:
        """An evicted entry's command, read from its record and checked."""
        try:
            data = os.pread(self._fd, record.end - record.offset, record.offset)
        except OSError as err:
            self._on_fault(f"reading raft index {idx} back from the journal failed", err)
        if len(data) >= _RECORD.size:
            length, crc, index, kept_term = _RECORD.unpack_from(data)
            command = data[_RECORD.size :]
            if (index, kept_term, length) == (idx, term, len(command)) and _crc(
                index, kept_term, command
            ) == crc:
                return command
        self._on_fault(
            "the Raft journal file does not hold an entry it should",
            RuntimeError(f"raft index {idx} (term {term}) is not where the journal wrote it"),
        )

    def _evict(self) -> None:
        """Drops the oldest kept commands beyond `hot_bytes`, never the newest."""
        commands = self._commands
        while self._hot_size > self.hot_bytes and self._hot_from < len(commands) - 1:
            command = commands[self._hot_from]
            if command is not None:
                self._hot_size -= len(command)
                commands[self._hot_from] = None
            self._hot_from += 1

    def _unkeep(self, start: int, stop: int) -> None:
        """Takes the kept commands of entries about to be dropped off the count."""
        for command in self._commands[start:stop]:
            if command is not None:
                self._hot_size -= len(command)

    def _destroy(self) -> None:
        if self._fd < 0:
            return
        self.sync()
        self._store_meta()
        os.close(self._fd)
        self._fd = -1

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        if raftCommitIndex != self._meta["commit_index"]:
            self._meta["commit_index"] = raftCommitIndex
            self._meta_dirty = True

    def getRaftCommitIndex(self) -> int:
        return int(self._meta["commit_index"])

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        self._meta["term"] = term
        self._meta["voted_for"] = votedForNodeId
        # Raft needs term and vote on stable storage before any message that
        # reflects them is sent, so this is synchronous.
        self._store_meta()

    def getCurrentTerm(self) -> int:
        return int(self._meta["term"])

    def getVotedForNodeId(self) -> Any:
        return self._meta["voted_for"]

    def onOneSecondTimer(self) -> None:
        if self._meta_dirty:
            self._store_meta()

    # -- durability --------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Whether appended entries are waiting for a sync."""
        return self._dirty

    def sync(self) -> None:
        """Makes everything appended so far durable (one fdatasync)."""
        if not self._dirty:
            return
        if self.sync_enabled:
            began = time.monotonic()
            try:
                self.disk.fdatasync(self._fd)
            except OSError as err:
                self._on_fault("syncing the Raft journal failed", err)
            if self.on_sync is not None:
                self.on_sync(time.monotonic() - began)
            self._syncs += 1
            self._synced_entries += self._unsynced_entries
            self._synced_end = self._end
        self._dirty = False
        self._unsynced_entries = 0
        self._synced_last_index = self.last_index

    def stats(self) -> JournalStats:
        return JournalStats(self._syncs, self._synced_entries)

    @property
    def last_index(self) -> int:
        """The last index the file holds (0 when empty)."""
        return self._records.index[-1] if self._records else 0

    def drop_before(self, index: int, term: int) -> bool:
        """Compacts the journal to start at the entry (`index`, `term`) if it
        holds it; used on start when a snapshot was written but the crash came
        before the journal was compacted to it."""
        records = self._records
        for position in range(len(self._commands)):
            if (records.index[position], records.term[position]) == (index, term):
                if position:
                    self.deleteEntriesTo(position)
                return True
        return False

    # -- files -------------------------------------------------------------

    def _open_log(self) -> int:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        size = os.fstat(fd).st_size
        if size == 0:
            os.write(fd, _MAGIC)
            if self.sync_enabled:
                self.disk.fsync(fd)
                self.disk.fsync_directory(self.directory)
                self._synced_end = len(_MAGIC)
            self._allocated = len(_MAGIC)
            return fd
        if os.pread(fd, len(_MAGIC), 0) != _MAGIC:
            os.close(fd)
            raise OSError(f"{self.path} is not a Cortex Raft journal (unknown header)")
        offset = len(_MAGIC)
        for index, term, start, end, command in _scan(fd, size):
            self._commands.append(command)
            self._records.append(index, term, start, end)
            self._hot_size += len(command)
            self._evict()
            offset = end
        self._allocated = size
        if offset < size and not _zeros_from(fd, offset, size):
            log.warning(
                "raft journal %s: %d bytes after index %d are torn or corrupt (a write the"
                " crash interrupted); cutting them off",
                self.path, size - offset, self.last_index,
            )  # fmt: skip
            os.ftruncate(fd, offset)
            if self.sync_enabled:
                self.disk.fsync(fd)
            self._allocated = offset
        self._synced_last_index = self.last_index
        self._synced_end = offset
        # A commit index past the journal's end came from entries lost unsynced.
        self._meta["commit_index"] = min(int(self._meta["commit_index"]), max(self.last_index, 1))
        return fd

    @property
    def size_bytes(self) -> int:
        """The journal file's size: the entries since the last compaction."""
        return self._end

    @property
    def _end(self) -> int:
        return self._records.end[-1] if self._records else len(_MAGIC)

    def _append_record(self, command: bytes, index: int, term: int) -> None:
        offset = self._end
        record = _RECORD.pack(len(command), _crc(index, term, command), index, term) + command
        if offset + len(record) > self._allocated:
            self._preallocate(offset + len(record))
        try:
            view = memoryview(record)
            position = offset
            while view:
                written = os.pwrite(self._fd, view, position)
                view, position = view[written:], position + written
        except OSError as err:
            self._on_fault(f"appending raft index {index} to the journal failed", err)
        # Past the zeros when there was no room for more (`_preallocate`).
        self._allocated = max(self._allocated, offset + len(record))
        self._records.append(index, term, offset, offset + len(record))
        self._dirty = True
        self._unsynced_entries += 1

    def _preallocate(self, needed: int) -> None:
        """Grows the file with zeros past `needed` (module doc). A disk
        without room for them gets none: the record is written all the same,
        and fails only if there is no room for it either."""
        if not (self.preallocate_bytes and self.sync_enabled):
            return
        target = needed + min(self.preallocate_bytes, max(needed, _PREALLOCATE_MIN))
        # Never over a record: the file holds nothing but zeros past both.
        position = max(self._allocated, self._end)
        try:
            while position < target:
                position += os.pwrite(self._fd, _ZEROS[: target - position], position)
        except OSError as err:
            log.debug("raft journal %s: no room to grow it ahead (%s)", self.path, err)
            # The zeros written are taken off again: the file ends where
            # its records or earlier zeros end.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, max(self._allocated, self._end))
            return
        self._allocated = target

    def _cut_file(self, position: int, replaced_by_leader: bool = True) -> None:
        """Drops the file's records from `position` on."""
        if position >= len(self._records):
            return
        applied = self._applied_index()
        replaced = self._records[position]
        if replaced_by_leader and replaced.index <= applied:
            self._on_fault(
                "the Raft journal diverged",
                RuntimeError(
                    f"the leader replaced raft index {replaced.index} (term {replaced.term}),"
                    f" which this node already applied (applied index {applied})"
                ),
            )
        try:
            os.ftruncate(self._fd, replaced.offset)
        except OSError as err:
            self._on_fault("truncating the Raft journal failed", err)
        self._allocated = replaced.offset
        self._records.cut(position)
        self._synced_end = min(self._synced_end, replaced.offset)
        self._dirty = True

    def _rewrite_from(self, position: int) -> None:
        """Compaction: a new file holding the records from `position` on,
        synced, then renamed over the old one."""
        start = self._records[position].offset if position < len(self._records) else self._end
        end = self._end
        tmp = self.path + ".compact"
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, _MAGIC)
                offset = start
                while offset < end:
                    chunk = os.pread(self._fd, min(_COPY_CHUNK, end - offset), offset)
                    if not chunk:
                        raise OSError(f"{self.path} ended at {offset}, expected {end} bytes")
                    os.write(fd, chunk)
                    offset += len(chunk)
                if self.sync_enabled:
                    self.disk.fsync(fd)
            except BaseException:
                os.close(fd)
                raise
            os.replace(tmp, self.path)
            if self.sync_enabled:
                self.disk.fsync_directory(self.directory)
        except OSError as err:
            self._on_fault("compacting the Raft journal failed", err)
        os.close(self._fd)
        self._fd = fd
        shift = start - len(_MAGIC)
        self._records = self._records.moved(position, shift)
        self._allocated = self._end
        if self.sync_enabled:
            self._synced_entries += self._unsynced_entries
            self._dirty = False
            self._unsynced_entries = 0
            self._synced_last_index = self.last_index
            self._synced_end = self._end
        else:
            self._synced_end = 0  # a new file, never synced

    def _store_meta(self) -> None:
        # Never record a commit index the durable journal does not reach.
        self.sync()
        meta = dict(self._meta)
        meta["commit_index"] = min(int(meta["commit_index"]), max(self._synced_last_index, 1))
        content = json.dumps(meta, sort_keys=True).encode()
        try:
            write_file_durably(self.meta_path, content, self.sync_enabled, self.disk)
        except OSError as err:
            self._on_fault("writing the Raft term and vote failed", err)
        if self.sync_enabled:
            self._durable_meta = content
        self._meta_dirty = False

    def durable_state(self) -> tuple[int, bytes | None]:
        """What stable storage holds of this journal: the log file's synced
        length, and the meta file's content last written durably (None: none
        ever was). What a simulated power cut leaves behind."""
        return self._synced_end, self._durable_meta


def read_meta(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return {}
    except ValueError as err:
        raise OSError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise OSError(f"{path} does not hold a JSON object")
    return data


def journal_last_index(directory: str) -> int:
    """The last index a journal in `directory` holds, without opening it for
    writing (0 when there is none). Read a window at a time, like the node's
    own opening of it: the file may be far larger than what a node keeps."""
    path = os.path.join(directory, LOG_FILE)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        if os.pread(fd, len(_MAGIC), 0) != _MAGIC:
            return 0
        last = 0
        for index, _, _, _, _ in _scan(fd, os.fstat(fd).st_size):
            last = index
        return last
    finally:
        os.close(fd)


def _zeros_from(fd: int, offset: int, size: int) -> bool:
    """Whether the file `fd` holds only zeros from `offset` to `size` (what
    it was grown ahead by, never written)."""
    while offset < size:
        chunk = os.pread(fd, min(len(_ZEROS), size - offset), offset)
        if not chunk or chunk.count(0) != len(chunk):
            return False
        offset += len(chunk)
    return True


def _scan(fd: int, size: int) -> Iterator[tuple[int, int, int, int, bytes]]:
    """The whole records of the journal file `fd` (`size` bytes, after its
    header), each as (index, term, offset, end, command), up to the first
    torn or corrupt one. Read `_READ_WINDOW` bytes at a time."""
    offset = len(_MAGIC)
    window, window_start = b"", offset
    while offset + _RECORD.size <= size:
        if offset + _RECORD.size > window_start + len(window):
            window, window_start = os.pread(fd, _READ_WINDOW, offset), offset
        length, crc, index, term = _RECORD.unpack_from(window, offset - window_start)
        start = offset + _RECORD.size
        if start + length > size:
            return  # torn: the file ends inside this record
        if start + length > window_start + len(window):
            window = os.pread(fd, max(_READ_WINDOW, start + length - offset), offset)
            window_start = offset
        command = window[start - window_start : start - window_start + length]
        if len(command) < length or _crc(index, term, command) != crc:
            return
        yield index, term, offset, start + length, command
        offset = start + length


def discard_temporary_files(directory: str) -> None:
    for name in (LOG_FILE + ".compact", META_FILE + ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(directory, name))


LEGACY_LOG_FILE = "raft.journal"


def migrate_legacy_journal(directory: str, sync: bool = True) -> bool:
    """Converts a journal written by pysyncobj's own `FileJournal` (earlier
    Cortex versions) into this format, once; the old files are kept with a
    `.migrated` suffix. Returns whether there was one."""
    legacy = os.path.join(directory, LEGACY_LOG_FILE)
    if not os.path.exists(legacy) or os.path.exists(os.path.join(directory, LOG_FILE)):
        return False
    from pysyncobj.journal import FileJournal

    old = FileJournal(legacy)
    try:
        entries = [old[i] for i in range(len(old))]
        meta = {
            "term": old.getCurrentTerm(),
            "voted_for": old.getVotedForNodeId(),
            "commit_index": old.getRaftCommitIndex(),
        }
    finally:
        old._destroy()
    building = os.path.join(directory, "raft-migrate")
    os.makedirs(building, exist_ok=True)
    for name in (LOG_FILE, META_FILE):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(building, name))
    journal = DurableJournal(building, sync=sync)
    for command, index, term in entries:
        journal.add(bytes(command), index, term)
    journal.sync()
    journal._meta.update(meta)
    journal._destroy()
    for name in (META_FILE, LOG_FILE):  # the log last: its presence marks the migration done
        os.replace(os.path.join(building, name), os.path.join(directory, name))
    os.rmdir(building)
    for name in (LEGACY_LOG_FILE, LEGACY_LOG_FILE + ".meta"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(os.path.join(directory, name), os.path.join(directory, name + ".migrated"))
    if sync:
        fsync_directory(directory)
    log.info("converted the Raft journal in %s (%d entries) to the synced format",
             directory, len(entries))  # fmt: skip
    return True


class _Entries(Sequence[LogEntry]):
    """A range of the journal as pysyncobj slices it: entries are read (back
    from the file if evicted) only when looked at, so sending a lagging
    follower the first few of a long tail does not load all of it. Valid
    until the journal next changes (pysyncobj uses a slice at once, on the
    Raft thread that alone changes the journal); slicing it gives a list."""

    def __init__(self, journal: DurableJournal, start: int, stop: int, step: int) -> None:
        self._journal = journal
        self._positions = range(start, stop, step)

    def __len__(self) -> int:
        return len(self._positions)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice):
            return [self._journal._loaded(p) for p in self._positions[item]]
        return self._journal._loaded(self._positions[item])
