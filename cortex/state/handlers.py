"""Which function applies each payload type: the tables of the task, node,
workflow and purge modules, put together here (nothing registers itself on
import). Every payload type in `entries.PAYLOAD_TYPES` has exactly one
handler (tests/unit/test_state_handlers.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cortex.state import entries as e
from cortex.state.key_limits import LIMIT_HANDLERS
from cortex.state.node_transitions import NODE_HANDLERS
from cortex.state.purge import PURGE_HANDLERS
from cortex.state.schedule_transitions import SCHEDULE_HANDLERS
from cortex.state.transitions import TASK_HANDLERS, ApplyContext, EntryHandler
from cortex.state.workflow_transitions import WORKFLOW_HANDLERS


def _read_barrier(ctx: ApplyContext, payload: e.ReadBarrier) -> dict[str, Any]:
    """A read barrier writes nothing but the applied index, like every entry."""
    return {}


READ_HANDLERS: Mapping[type[e.Payload], EntryHandler] = {e.ReadBarrier: _read_barrier}

HANDLER_TABLES: tuple[Mapping[type[e.Payload], EntryHandler], ...] = (
    TASK_HANDLERS,
    NODE_HANDLERS,
    WORKFLOW_HANDLERS,
    PURGE_HANDLERS,
    READ_HANDLERS,
    LIMIT_HANDLERS,
    SCHEDULE_HANDLERS,
)
HANDLERS: dict[type[e.Payload], EntryHandler] = {
    payload_type: handler for table in HANDLER_TABLES for payload_type, handler in table.items()
}
