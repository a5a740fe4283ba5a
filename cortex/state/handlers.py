"""Which function applies each payload type: the tables of the task, node,
workflow and purge modules, put together here (nothing registers itself on
import). Every payload type in `entries.PAYLOAD_TYPES` has exactly one
handler (tests/unit/test_state_handlers.py)."""

from __future__ import annotations

from collections.abc import Mapping

from cortex.state import entries as e
from cortex.state.node_transitions import NODE_HANDLERS
from cortex.state.purge import PURGE_HANDLERS
from cortex.state.transitions import TASK_HANDLERS, EntryHandler
from cortex.state.workflow_transitions import WORKFLOW_HANDLERS

HANDLER_TABLES: tuple[Mapping[type[e.Payload], EntryHandler], ...] = (
    TASK_HANDLERS,
    NODE_HANDLERS,
    WORKFLOW_HANDLERS,
    PURGE_HANDLERS,
)
HANDLERS: dict[type[e.Payload], EntryHandler] = {
    payload_type: handler for table in HANDLER_TABLES for payload_type, handler in table.items()
}
