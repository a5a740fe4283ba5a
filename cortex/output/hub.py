"""Where an executing node's attempts write their output, and where live
readers wait for it. Writers append to the attempt's log and wake readers;
readers pull from the log at their own pace, so a slow subscriber costs disk
reads, never memory, and never slows the task down."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cortex.output.log import LogEnd, LogWriter
from cortex.output.sweeper import RetentionSweeper

log = logging.getLogger(__name__)

MIN_SEGMENT_BYTES = 4 * 1024
MAX_SEGMENT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class OutputLimits:
    max_bytes_per_attempt: int = 256 * 1024 * 1024
    max_total_bytes: int = 4 * 1024 * 1024 * 1024

    @property
    def segment_bytes(self) -> int:
        """Retention removes whole segments, so a long attempt keeps between
        3/4 of its limit and the limit."""
        return min(max(self.max_bytes_per_attempt // 8, MIN_SEGMENT_BYTES), MAX_SEGMENT_BYTES)


def check_path_part(value: str) -> str:
    if not value or "/" in value or "\0" in value or value in (".", ".."):
        raise ValueError(f"{value!r} cannot name an output directory")
    return value


class LiveLog:
    """An attempt whose writer is open: its committed end and a condition
    readers wait on for bytes past their position."""

    def __init__(self, task_id: str, attempt: int, directory: Path) -> None:
        self.task_id = task_id
        self.attempt = attempt
        self.directory = directory
        self._cond = threading.Condition()
        self.end = 0
        self.closed = False
        self.outcome: LogEnd | None = None

    def advance(self, end: int) -> None:
        with self._cond:
            self.end = max(self.end, end)
            self._cond.notify_all()

    def finish(self, outcome: LogEnd) -> None:
        with self._cond:
            self.outcome = outcome
            self.closed = True
            self._cond.notify_all()

    def wait_past(self, position: int, timeout: float) -> None:
        """Returns once bytes past `position` are committed, the log closes,
        or `timeout` passes."""
        with self._cond:
            self._cond.wait_for(lambda: self.end > position or self.closed, timeout)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class AttemptOutput:
    """The sink an executor writes one attempt's output to. Never raises: a
    failing disk must not stop the pipes draining (the task would block)."""

    def __init__(self, hub: OutputHub, live: LiveLog, writer: LogWriter) -> None:
        self._hub = hub
        self._live = live
        self._writer = writer
        self._write_error: str | None = None
        self._closed = False

    @property
    def directory(self) -> Path:
        return self._live.directory

    @property
    def resumed_offsets(self) -> dict[str, int]:
        """Bytes of each stream the log already held when it was reopened."""
        return dict(self._writer.resumed)

    def write(self, stream: str, data: bytes) -> None:
        if not data or self._write_error is not None:
            return
        try:
            chunk = self._writer.append(stream, data, int(time.time() * 1000))
        except (OSError, ValueError) as err:
            self._write_error = f"output log write failed: {err}"
            log.error("task %s attempt %d: %s; further output is not kept",
                      self._live.task_id, self._live.attempt, self._write_error)  # fmt: skip
            return
        self._live.advance(chunk.end)

    def close(self, exit_code: int | None = None, error: str | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        outcome = LogEnd(
            total_bytes=self._writer.end,
            closed_at_ms=int(time.time() * 1000),
            exit_code=exit_code,
            error=error,
            write_error=self._write_error,
        )
        try:
            self._writer.close(outcome)
        except OSError as err:
            log.error("task %s attempt %d: could not close its output log: %s",
                      self._live.task_id, self._live.attempt, err)  # fmt: skip
        self._live.finish(outcome)
        self._hub._forget(self._live)


class OutputHub:
    """Opens attempts' output logs under `root` (the node's `attempts` dir),
    keeps the live ones for readers, and enforces retention."""

    def __init__(self, root: Path, limits: OutputLimits | None = None) -> None:
        self.root = root
        self.limits = limits or OutputLimits()
        self._lock = threading.Lock()
        self._opened = threading.Condition(self._lock)
        self._live: dict[tuple[str, int], LiveLog] = {}
        self.retention = RetentionSweeper(root, self.limits.max_total_bytes, self._live_directories)

    def start(self) -> None:
        self.retention.start()

    def stop(self) -> None:
        self.retention.stop()
        with self._lock:
            live = list(self._live.values())
        for entry in live:
            entry.wake()

    def directory(self, task_id: str, attempt: int) -> Path:
        return self.root / check_path_part(task_id) / str(int(attempt)) / "output"

    def open(self, task_id: str, attempt: int, resume: bool = False) -> AttemptOutput:
        """Starts an attempt's log (empty; with `resume`, carrying on what an
        earlier writer left of it) and announces it to waiting readers."""
        directory = self.directory(task_id, attempt)
        live = LiveLog(task_id, attempt, directory)
        # Announced before its files exist: a reader must never see a log on
        # disk with no live writer and take it for one whose node died.
        with self._lock:
            self._live[(task_id, attempt)] = live
            self._opened.notify_all()
        try:
            writer = LogWriter(
                directory,
                self.limits.segment_bytes,
                self.limits.max_bytes_per_attempt,
                self.retention.account,
                resume,
            )
        except BaseException:
            self._forget(live)
            raise
        live.advance(writer.end)
        return AttemptOutput(self, live, writer)

    def discard(self, task_ids: Iterable[str]) -> None:
        """Forgets the output of tasks purged from the replicated state: their
        directories go in the background. Never blocks."""
        valid = []
        for task_id in task_ids:
            try:
                valid.append(check_path_part(task_id))
            except ValueError:
                continue
        self.retention.discard(valid)

    def live(self, task_id: str, attempt: int) -> LiveLog | None:
        with self._lock:
            return self._live.get((task_id, attempt))

    def wait_opened(self, task_id: str, attempt: int, timeout: float) -> LiveLog | None:
        """The attempt's live log, waiting up to `timeout` for it to open."""
        with self._opened:
            self._opened.wait_for(lambda: (task_id, attempt) in self._live, timeout)
            return self._live.get((task_id, attempt))

    def _forget(self, live: LiveLog) -> None:
        with self._lock:
            if self._live.get((live.task_id, live.attempt)) is live:
                del self._live[(live.task_id, live.attempt)]
            self._opened.notify_all()

    def _live_directories(self) -> set[Path]:
        with self._lock:
            return {live.directory for live in self._live.values()}
