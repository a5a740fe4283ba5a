"""The entry-handler table apply dispatches on: every payload type has
exactly one handler, and the table is complete however the package was
imported (it is assembled in one place, never registered by side effect)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from cortex.state import entries as e
from cortex.state.handlers import HANDLER_TABLES, HANDLERS


def test_every_payload_type_has_exactly_one_handler() -> None:
    counts = Counter(payload_type for table in HANDLER_TABLES for payload_type in table)
    assert {t: n for t, n in counts.items() if n != 1} == {}
    assert set(counts) == set(e.PAYLOAD_TYPES.values())
    assert set(HANDLERS) == set(e.PAYLOAD_TYPES.values())
    for table in HANDLER_TABLES:
        for payload_type, handler in table.items():
            assert HANDLERS[payload_type] is handler


def test_the_table_is_whole_on_its_own_and_nothing_adds_to_it() -> None:
    """In a fresh interpreter: importing the table alone gives every handler,
    and importing the rest of cortex.state afterwards changes nothing."""
    program = """
import importlib, pkgutil
import cortex.state.entries as e
from cortex.state.handlers import HANDLERS
before = dict(HANDLERS)
assert set(before) == set(e.PAYLOAD_TYPES.values()), sorted(
    t.TYPE for t in set(e.PAYLOAD_TYPES.values()) - set(before))
import cortex.state
for module in pkgutil.iter_modules(cortex.state.__path__, "cortex.state."):
    importlib.import_module(module.name)
assert HANDLERS == before
print(len(HANDLERS))
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(len(e.PAYLOAD_TYPES))
