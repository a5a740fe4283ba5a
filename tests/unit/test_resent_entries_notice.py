"""pysyncobj's CRITICAL about truncating already-applied entries, logged also
when a leader merely sends the same entries again, reaches the node log as an
INFO that says what guards against a real divergence; its other messages
keep their level."""

from __future__ import annotations

import logging

import pysyncobj.syncobj
import pytest

import cortex.raft.group  # noqa: F401 - installs the filter


def test_the_resent_entries_critical_becomes_an_explained_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger(pysyncobj.syncobj.__name__)
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        logger.critical(
            "truncating already-applied log entries from index %d (last applied: %d) - state"
            " machine may have diverged from other cluster members",
            25,
            28,
        )
        logger.critical("failed to load full dump")
    overlap, other = caplog.records
    assert (overlap.levelno, overlap.levelname) == (logging.INFO, "INFO")
    assert "from index 25 (last applied: 28)" in overlap.getMessage()
    assert "stops this node if an applied entry is replaced" in overlap.getMessage()
    assert (other.levelno, other.getMessage()) == (logging.CRITICAL, "failed to load full dump")
