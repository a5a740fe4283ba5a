"""Task output and event streaming: per-attempt output logs on the executing
node, live fan-out, StreamTaskOutput from any node (relayed from the
executing one), and WatchEvents. Output never goes through Raft."""

from cortex.output.events import EventFilter, EventWatch
from cortex.output.hub import AttemptOutput, OutputHub, OutputLimits
from cortex.output.streaming import StreamingService

__all__ = [
    "AttemptOutput",
    "EventFilter",
    "EventWatch",
    "OutputHub",
    "OutputLimits",
    "StreamingService",
]
