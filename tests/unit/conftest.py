"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.workflow_sim import WorkflowLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[WorkflowLog]:
    """A state machine on a SQLite file of its own, the three nodes joined,
    closed after the test. A module that needs another history defines its
    own `log`."""
    log = WorkflowLog(tmp_path / "state.db")
    yield log
    log.close()
