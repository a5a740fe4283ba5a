"""The node's two server streams, StreamTaskOutput and WatchEvents, built
from its parts; the gRPC servicer hands requests here."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from cortex.output.events import EventFeed, EventWatch, EventWatcher
from cortex.output.hub import OutputHub
from cortex.output.relay import RelayCalls, RelayClient, StreamContext
from cortex.output.stream import OutputStreamer
from cortex.output.ticker import StateTicker
from cortex.state.queries import EventView, StateReader
from cortex.state.transitions import TaskChange
from cortex.v1 import cortex_pb2 as pb


class StreamingService:
    def __init__(
        self,
        node_id: str,
        db_path: str,
        reader: StateReader,
        hub: OutputHub,
        peers: RelayCalls,
        relay_stall_grace_s: float = 5.0,
    ) -> None:
        self.ticker = StateTicker()
        self.relay = RelayClient(peers, relay_stall_grace_s)
        self.output = OutputStreamer(node_id, reader, hub, self.ticker, self.relay)
        self.events = EventWatcher(EventFeed(db_path), self.ticker)
        self._output_streams = 0
        self._output_streams_lock = threading.Lock()

    @property
    def output_streams(self) -> int:
        """Task output streams being served now (to clients and relaying nodes)."""
        return self._output_streams

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """StateMachine listener (Raft thread): wakes waiting streams."""
        self.ticker.on_change(index, changes)
        self.relay.on_change(index, changes)

    def start(self) -> None:
        self.relay.start()

    def stop(self) -> None:
        """Ends every open stream promptly (relays are cancelled, waits return)."""
        self.ticker.close()
        self.relay.stop()

    def task_output(
        self,
        request: pb.StreamTaskOutputRequest,
        context: StreamContext,
        relayed_for: str | None = None,
    ) -> Iterator[pb.StreamTaskOutputResponse]:
        return self._counted(self.output.stream(request, context, relayed_for))

    def _counted(
        self, stream: Iterator[pb.StreamTaskOutputResponse]
    ) -> Iterator[pb.StreamTaskOutputResponse]:
        """`stream`, counted in `output_streams` from its first read until it
        ends, fails or is closed (gRPC closes a cancelled call's stream)."""
        with self._output_streams_lock:
            self._output_streams += 1
        try:
            yield from stream
        finally:
            with self._output_streams_lock:
                self._output_streams -= 1

    def watch_events(self, request: EventWatch, context: StreamContext) -> Iterator[EventView]:
        return self.events.watch(request, context)
