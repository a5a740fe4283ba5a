"""SQLite state: schema, the deterministic apply, and read queries."""

from cortex.state.machine import StateMachine, state_digest
from cortex.state.transitions import TERMINAL_STATES, TaskChange

__all__ = ["StateMachine", "TaskChange", "TERMINAL_STATES", "state_digest"]
