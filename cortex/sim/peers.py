"""Node-to-node calls in the simulation: the `PeerCalls` a node's components
use, carried by the simulated network's peer channel to the other node's
endpoint, which answers as the peer listener would."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from cortex.errors import CortexError, FailedPrecondition, Unauthenticated, Unavailable
from cortex.membership.peer_calls import Heartbeat, Removal
from cortex.sim.clock import SimClock
from cortex.sim.network import PEER, SimNetwork

_ERRORS: dict[str, type[CortexError]] = {
    "Unauthenticated": Unauthenticated,
    "FailedPrecondition": FailedPrecondition,
}


class PeerEndpoint:
    """One node's side of the peer channel: it calls other nodes (`PeerCalls`)
    and answers their calls with `handlers`."""

    def __init__(
        self,
        node_id: str,
        address: str,
        clock: SimClock,
        network: SimNetwork,
        route: Callable[[str], str],
        handlers: dict[str, Callable[[Any], Any]],
    ) -> None:
        self._node_id = node_id
        self._address = address
        self._clock = clock
        self._network = network
        self._route = route
        self._handlers = handlers
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[int, Future[Any]]] = {}
        network.attach(address, self._receive, PEER)

    # -- PeerCalls ----------------------------------------------------------------

    def heartbeat(self, address: str, heartbeat: Heartbeat, timeout_s: float) -> Future[None]:
        return self._call(address, "heartbeat", heartbeat, timeout_s)

    def applied_index(self, address: str, timeout_s: float) -> int:
        raise Unavailable("not offered in the simulation")

    def remove_node(self, address: str, node_id: str, reason: str, timeout_s: float) -> Removal:
        raise Unavailable("not offered in the simulation")

    # -- the channel --------------------------------------------------------------

    def _call(self, address: str, method: str, payload: Any, timeout_s: float) -> Future[Any]:
        future: Future[Any] = Future()
        call_id = next(self._ids)
        self._pending[call_id] = (self._clock.now_us + int(timeout_s * 1_000_000), future)
        self._network.send(self._address, self._route(address), ("call", call_id, method, payload),
                           PEER)  # fmt: skip
        return future

    def _receive(self, src: str, message: Any) -> None:
        kind = message[0]
        if kind == "call":
            _, call_id, method, payload = message
            previous, self._clock.current = self._clock.current, self._node_id
            try:
                result, error = self._handlers[method](payload), None
            except CortexError as err:
                result, error = None, (type(err).__name__, str(err))
            finally:
                self._clock.current = previous
            self._network.send(self._address, src, ("reply", call_id, result, error), PEER)
        elif kind == "reply":
            _, call_id, result, error = message
            pending = self._pending.pop(call_id, None)
            if pending is None or pending[1].done():
                return  # answered late, or twice
            if error is None:
                pending[1].set_result(result)
            else:
                name, text = error
                pending[1].set_exception(_ERRORS.get(name, CortexError)(text))

    def expire(self) -> None:
        now = self._clock.now_us
        for call_id, (deadline, future) in list(self._pending.items()):
            if deadline <= now:
                del self._pending[call_id]
                if not future.done():
                    future.set_exception(Unavailable("the peer did not answer in time"))

    def close(self) -> None:
        for _, future in self._pending.values():
            if not future.done():
                future.set_exception(Unavailable("node stopped"))
        self._pending.clear()
