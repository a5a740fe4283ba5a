"""Stopping the node on a local fault.

A failure that belongs to this machine rather than to the replicated log
(a full disk, an I/O error, memory exhausted, a bug) must never become a
replicated outcome: recording it would give this node a state no other node
has, for good. The node stops instead, before anything moves past the point
of failure, and a restart after the cause is fixed replays from the durable
journal. pysyncobj stalls the whole cluster when an exception escapes a
replicated method, so the stop is an immediate process exit, not a raise."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

log = logging.getLogger(__name__)

# sysexits.h: EX_IOERR for storage faults, EX_SOFTWARE for everything else.
EXIT_STORAGE_FAULT = 74
EXIT_LOCAL_FAULT = 70

_stopping = threading.Lock()


def is_storage_fault(err: BaseException) -> bool:
    import sqlite3

    return isinstance(err, OSError | sqlite3.OperationalError | sqlite3.DatabaseError)


def describe(err: BaseException) -> str:
    name = type(err).__qualname__
    module = type(err).__module__
    if module not in ("builtins", "__main__"):
        name = f"{module}.{name}"
    text = str(err)
    return f"{name}: {text}" if text else name


StopHandler = Callable[[str, BaseException, str], NoReturn]


def stop_node(what: str, err: BaseException, advice: str) -> NoReturn:
    """Logs one line naming `what` failed, the cause and `advice`, and exits
    the process at once. Never returns. (A simulator running
    whole clusters in one process installs a handler that stops one node.)"""
    _handler(what, err, advice)


def set_stop_handler(handler: StopHandler | None) -> None:
    """Replaces how a node stops (None: exit the process, the default)."""
    global _handler
    _handler = handler or _exit_process


def _exit_process(what: str, err: BaseException, advice: str) -> NoReturn:
    # A second thread failing meanwhile waits for the first to finish exiting.
    _stopping.acquire()
    code = EXIT_STORAGE_FAULT if is_storage_fault(err) else EXIT_LOCAL_FAULT
    log.critical("%s: %s. Stopping this node (exit %d). %s", what, describe(err), code, advice)
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:
            pass
    sys.stderr.flush()
    os._exit(code)


_handler: StopHandler = _exit_process
