"""Runs a command as a subprocess in its own process group, so a timeout or
a cancel kills everything it started; its output is pumped to the attempt's
sink as it arrives, keeping the tails. Shared by the executors that run a
local program (`shell`, `subagent`)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO

from cortex.executors.base import Execution, ExecutionResult, TailBuffer

log = logging.getLogger(__name__)

_POLL_S = 0.02


def command_argv(command: list[str] | str) -> list[str]:
    """An argv list as given, or a string run through `/bin/sh -c`."""
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    return list(command)


def _pump(stream: IO[bytes], write: Callable[[bytes], None], tail: TailBuffer) -> None:
    """Copies a pipe to the attempt's output and keeps its tail. A failing
    write does not stop the copy: an undrained pipe would block the task."""
    failed = False
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            break
        if not failed:
            try:
                write(chunk)
            except Exception:
                log.exception("writing task output failed; keeping only its tail")
                failed = True
        tail.write(chunk)
    stream.close()


def _output_writers(
    execution: Execution, files: contextlib.ExitStack
) -> tuple[Callable[[bytes], None], Callable[[bytes], None]]:
    """Where stdout and stderr go: the attempt's output sink when it has
    one, else `stdout` and `stderr` files in its work dir."""
    sink = execution.output
    if sink is not None:
        return (lambda data: sink.write("stdout", data)), (lambda data: sink.write("stderr", data))

    def file_writer(name: str) -> Callable[[bytes], None]:
        handle = files.enter_context(open(os.path.join(execution.work_dir, name), "wb"))

        def write(data: bytes) -> None:
            handle.write(data)
            handle.flush()

        return write

    return file_writer("stdout"), file_writer("stderr")


def start_failure(err: OSError | ValueError, argv: list[str], cwd: str | None) -> ExecutionResult:
    """Why the command could not start, and whether it never can: a missing
    or non-executable program or working directory, or a NUL byte, fails the
    same way on every retry; running out of processes or memory may not."""
    program = argv[0]
    if isinstance(err, ValueError):
        return ExecutionResult(127, error=f"could not start command: {err}", permanent=True)
    if cwd and err.filename == cwd and err.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
        problem = "does not exist" if err.errno == errno.ENOENT else os.strerror(err.errno).lower()
        detail = f"working directory {cwd}: {problem}"
    elif err.errno == errno.ENOENT and "/" in program and os.path.exists(program):
        detail = f"{program}: its interpreter (#! line) was not found"
    elif err.errno == errno.ENOENT:
        detail = f"{program}: command not found"
    elif err.errno == errno.EACCES:
        detail = f"{program}: permission denied (not executable?)"
    elif err.errno == errno.ENOEXEC:
        detail = f"{program}: not an executable format"
    elif err.errno in (errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.ENAMETOOLONG):
        detail = f"{program}: {os.strerror(err.errno)}"
    else:
        return ExecutionResult(127, error=f"could not start command {program}: {err}")
    return ExecutionResult(127, error=f"could not start command: {detail}", permanent=True)


def kill_process_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def run_process(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    execution: Execution,
    cancel: threading.Event,
    stdin_path: str | None = None,
) -> ExecutionResult:
    """Runs `argv` to its end (or until `cancel`, or the spec's timeout),
    with standard input from `stdin_path` (default: nothing)."""
    if cwd is not None and "\x00" not in cwd:
        try:
            if not stat.S_ISDIR(os.stat(cwd).st_mode):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), cwd)
        except OSError as err:
            return start_failure(err, argv, cwd)
    stdout_tail = TailBuffer(execution.tail_bytes)
    stderr_tail = TailBuffer(execution.tail_bytes)
    with contextlib.ExitStack() as files:
        stdin: IO[bytes] | int = subprocess.DEVNULL
        if stdin_path is not None:
            stdin = files.enter_context(open(stdin_path, "rb"))
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except (OSError, ValueError) as err:
            return start_failure(err, argv, cwd)
        write_stdout, write_stderr = _output_writers(execution, files)
        assert process.stdout is not None and process.stderr is not None
        pumps = [
            threading.Thread(
                target=_pump, args=(process.stdout, write_stdout, stdout_tail), daemon=True
            ),
            threading.Thread(
                target=_pump, args=(process.stderr, write_stderr, stderr_tail), daemon=True
            ),
        ]
        for pump in pumps:
            pump.start()
        timed_out, cancelled = _wait(process, execution, cancel)
        # Whatever the command left behind in its group goes with it;
        # otherwise an orphan holding the pipes would keep us waiting.
        kill_process_group(process.pid, signal.SIGKILL)
        for pump in pumps:
            pump.join(timeout=5)
    code = process.returncode
    exit_code = 128 - code if code < 0 else code  # killed by signal N -> 128+N
    return ExecutionResult(
        exit_code=exit_code,
        stdout=stdout_tail.value(),
        stderr=stderr_tail.value(),
        stdout_truncated=stdout_tail.truncated,
        stderr_truncated=stderr_tail.truncated,
        timed_out=timed_out,
        cancelled=cancelled,
        error=f"timed out after {execution.spec.timeout_ms} ms" if timed_out else None,
        pid=process.pid,
    )


def _wait(
    process: subprocess.Popen[bytes], execution: Execution, cancel: threading.Event
) -> tuple[bool, bool]:
    timeout_ms = execution.spec.timeout_ms
    deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
    while process.poll() is None:
        if cancel.is_set():
            _terminate(process, execution.kill_grace_s)
            return False, True
        if deadline is not None and time.monotonic() >= deadline:
            _terminate(process, execution.kill_grace_s)
            return True, False
        try:
            process.wait(timeout=_POLL_S)
        except subprocess.TimeoutExpired:
            pass
    return False, False


def _terminate(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the whole group, SIGKILL after the grace period."""
    kill_process_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        kill_process_group(process.pid, signal.SIGKILL)
        process.wait()
