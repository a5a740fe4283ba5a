"""Cortex: a distributed task engine on a Raft-replicated SQLite state machine."""

__version__ = "0.1.0"
