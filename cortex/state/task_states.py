"""The task states that end a task and those of an attempt under way: what
apply, the read queries, the API and the clients all test a state against,
kept where importing them loads nothing else."""

from __future__ import annotations

TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "skipped", "dead_letter"})
ACTIVE_STATES = frozenset({"assigned", "running"})
