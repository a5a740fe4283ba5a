"""Where a client sends its writes: to the Raft leader when it can, saving
the hop a follower makes (it forwards a write to the leader and answers once
it has applied it itself).

Every answer's ResponseHeader names the leader as its node knows it
(`leader_id`, `leader_grpc_address`). A leader among the client's own nodes
is written to over the client's channel to it; another is given a channel
of its own when the first write after learning it comes. A write goes to the
leader only while that channel is connected (READY); otherwise it goes where
it would without routing, and the leader's channel keeps connecting for the
next one. A leader the client cannot reach (another network, an address its
TLS name does not cover) therefore costs nothing but the attempt, and a
client that never writes twice never opens a channel to it.

A write that fails on the leader's channel is tried again only as the client
tries any call again (CortexClient never tries a write again; Client by its
Retry rules, on its own nodes). Reads stay where they were sent."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from cortex.v1 import cortex_pb2_grpc as pb_grpc

OpenChannel = Callable[[str], Any]


_READY = grpc.ChannelConnectivity.READY


def _connected(channel: Any) -> bool:
    """Whether the channel is connected now, asking it to connect when idle
    (a channel whose connection closed stays idle until asked). An asyncio
    channel says so itself. A blocking channel's public way, `subscribe`,
    runs a polling thread that raises once the channel is closed under it,
    so this asks its core channel; where a gRPC release no longer offers
    that, the answer is no and writes stay on the client's nodes."""
    get_state = getattr(channel, "get_state", None)  # grpc.aio
    if get_state is not None:
        return bool(get_state(True) is _READY)
    check = getattr(getattr(channel, "_channel", None), "check_connectivity_state", None)
    return check is not None and check(True) == _READY.value[0]


class LeaderChannel:
    """A channel to one leader address."""

    def __init__(self, address: str, channel: Any) -> None:
        self.address = address
        self.channel = channel
        self.stub = pb_grpc.CortexServiceStub(channel)


class LeaderRoute:
    """What a client asks before a write (`pick`) and tells after every
    answer (`learn`). `own` holds the client's channels by address: a
    leader among them is written to over its channel. Safe to share between
    threads."""

    def __init__(self, own: Mapping[str, Any], open_channel: OpenChannel) -> None:
        self._open_channel = open_channel
        # The client's nodes' channels, then any leader's it opened, by address:
        # leadership moving back and forth reuses them, and a call still
        # running on one is never cut.
        self._channels = {address: LeaderChannel(address, c) for address, c in own.items()}
        self._own = frozenset(own)
        self._ids: dict[str, str] = {}  # the client's nodes' ids, from their answers
        # The leader's gRPC address, once learnt (None: no leader known).
        self._leader: str | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def leader(self) -> str | None:
        """The address writes go to while it is connected."""
        return self._leader

    def pick(self) -> LeaderChannel | None:
        """The leader's channel if it is connected, or None (writes then go
        where the client would send them without routing)."""
        address = self._leader
        if address is None:
            return None
        leader = self._channels.get(address)
        if leader is None:
            with self._lock:
                if self._closed:
                    return None
                leader = self._channels.get(address)
                if leader is None:
                    leader = LeaderChannel(address, self._open_channel(address))
                    self._channels[address] = leader
        return leader if _connected(leader.channel) else None

    def learn(self, response: Any, answered_at: str) -> None:
        """Takes what an answer's header says of the leader; `answered_at`
        is the address of the channel it came over."""
        if "header" not in response.DESCRIPTOR.fields_by_name or not response.HasField("header"):
            return
        header = response.header
        if answered_at in self._own and self._ids.get(answered_at) != header.node_id:
            self._ids = {**self._ids, answered_at: header.node_id}
        if not header.leader_id or not header.leader_grpc_address:
            return  # that node knows no leader now: keep what was learnt
        # One of the client's nodes, by id even when registered under another
        # spelling of its address.
        own = next((a for a, i in self._ids.items() if i == header.leader_id), None)
        self._leader = own or header.leader_grpc_address

    def release(self) -> list[Any]:
        """Forgets the channels the route opened and returns them, for the
        client to close (an asyncio channel's close is awaited)."""
        with self._lock:
            self._closed = True
            self._leader = None
            opened = [c.channel for a, c in self._channels.items() if a not in self._own]
            self._channels.clear()
        return opened
