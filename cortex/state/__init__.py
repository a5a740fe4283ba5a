"""SQLite state: schema, the deterministic apply, and read queries.

The names below are loaded when first asked for: importing a module of the
package (a read query, a spec rule, as clients and the CLI do) does not load
the state machine and every handler of apply with it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cortex.state.task_states import TERMINAL_STATES

if TYPE_CHECKING:
    from cortex.state.machine import StateMachine, state_digest
    from cortex.state.transitions import TaskChange

__all__ = ["StateMachine", "TaskChange", "TERMINAL_STATES", "state_digest"]

_HOMES = {
    "StateMachine": "cortex.state.machine",
    "state_digest": "cortex.state.machine",
    "TaskChange": "cortex.state.transitions",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
