"""What the blocking and asyncio clients are built from alike: the node
addresses, credentials, session and rotation, and one stub per node over a
channel of the client's own kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from cortex.api.auth import default_token, token_metadata
from cortex.api.session import Rotation, Session, addresses
from cortex.api.tls import ClientTls, client_tls_from_env
from cortex.client import requests as rq
from cortex.v1 import cortex_pb2_grpc as pb_grpc

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 5


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

    def _open_channel(self, address: str) -> Any:
        """A channel to one node, of the kind the client calls through."""
        raise NotImplementedError
