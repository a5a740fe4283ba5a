"""The Python client for Cortex: `Client` (blocking) and `AsyncClient`
(asyncio), typed results, session consistency over one or several nodes.

    from cortex.client import Client

    with Client(["127.0.0.1:7200", "127.0.0.1:7201"]) as cortex:
        task = cortex.submit_task(["echo", "hello"])
        print(cortex.wait_task(task.id).result.stdout)
"""

from cortex.client.aio import AsyncClient
from cortex.client.blocking import Client
from cortex.client.models import (
    Node,
    OutputChunk,
    OutputEnd,
    Page,
    Task,
    TaskResult,
    Workflow,
    WorkflowTask,
)
from cortex.errors import (
    AlreadyExists,
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

__all__ = [
    "AlreadyExists",
    "AsyncClient",
    "Client",
    "CortexError",
    "FailedPrecondition",
    "InvalidArgument",
    "Node",
    "NotFound",
    "OutputChunk",
    "OutputEnd",
    "Page",
    "ResourceExhausted",
    "Task",
    "TaskResult",
    "Unauthenticated",
    "Unavailable",
    "Workflow",
    "WorkflowTask",
]
