"""What a schedule may ask for: its overlap policies and the bounds of its
timing and catch-up window. Apply checks schedules against them, and the
CLI's and MCP's argument checks and help read them, so they are kept where
importing them loads nothing else."""

from __future__ import annotations

OVERLAP_POLICIES = ("skip", "buffer_one", "allow_all", "cancel_previous")
# How late a slot may still fire when a schedule names no catch-up window.
DEFAULT_CATCHUP_WINDOW_MS = 60_000
MAX_CATCHUP_WINDOW_MS = 366 * 86_400_000
MIN_EVERY_MS = 1000
MAX_EVERY_MS = 366 * 86_400_000
MAX_CRON_CHARS = 256
