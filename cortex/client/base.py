"""What the blocking and asyncio clients are built from alike: the node
addresses, credentials, session and rotation, and one stub per node over a
channel of the client's own kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from cortex.api.auth import default_token, token_metadata
from cortex.api.leader_route import LeaderRoute
from cortex.api.session import Rotation, Session, addresses
from cortex.api.tls import ClientTls, client_tls_from_env
from cortex.client import requests as rq
from cortex.v1 import cortex_pb2_grpc as pb_grpc

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 5
# The calls that propose a Raft entry: sent to the leader when it is known
# and connected (cortex.api.leader_route).
WRITE_METHODS = frozenset(
    {
        "SubmitTask",
        "SubmitTasks",
        "CancelTask",
        "RetryDeadLetterTask",
        "SubmitWorkflow",
        "CancelWorkflow",
    }
)


class ClientBase:
    def __init__(
        self,
        target: str | Sequence[str],
        *,
        token: str | None = None,
        tls: ClientTls | Literal[False] | None = None,
        consistency: str | int = "session",
        timeout: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        session_index: int = 0,
        route_writes: bool = True,
    ) -> None:
        self.addresses = addresses(target)
        self.timeout = timeout
        self.retries = retries
        self.session = Session(rq.consistency(consistency), session_index)
        self._metadata = token_metadata(token if token is not None else default_token())
        self._tls = client_tls_from_env() if tls is None else (tls or None)
        self._channels = [self._open_channel(address) for address in self.addresses]
        self._stubs = [pb_grpc.CortexServiceStub(channel) for channel in self._channels]
        self._rotation = Rotation(len(self.addresses))
        self._route = (
            LeaderRoute(dict(zip(self.addresses, self._channels, strict=True)), self._open_channel)
            if route_writes
            else None
        )

    def _open_channel(self, address: str) -> Any:
        """A channel to one node, of the kind the client calls through."""
        raise NotImplementedError

    @property
    def leader_address(self) -> str | None:
        """The leader's gRPC address writes go to while connected (None: none
        is known yet, or `route_writes` is off)."""
        return None if self._route is None else self._route.leader

    def _target(self, method: str, first: int, attempt: int) -> tuple[str, Any]:
        """The address and stub attempt number `attempt` of a call goes to: a
        write's first to the leader when connected, the rest round-robin."""
        if attempt == 0 and self._route is not None and method in WRITE_METHODS:
            leader = self._route.pick()
            if leader is not None:
                return leader.address, leader.stub
        index = (first + attempt) % len(self._stubs)
        return self.addresses[index], self._stubs[index]

    def _learn(self, response: Any, address: str) -> None:
        """Takes an answer from `address` in: its Raft index, and its leader."""
        self.session.observe(response)
        if self._route is not None:
            self._route.learn(response, address)

    def _opened_channels(self) -> list[Any]:
        """Every channel the client holds, to close."""
        return [*self._channels, *([] if self._route is None else self._route.release())]
