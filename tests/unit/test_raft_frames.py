"""The Raft port's frames between two real connections over a socket pair:
a message crosses as its sealed pickle, uncompressed, bytes in it as they
are, and a frame from a node that still compresses (pysyncobj's zlib) or
pickles with protocol 2 is read as well."""

from __future__ import annotations

import pickle
import socket
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
import pytest
from pysyncobj.poller import createPoller

from cortex.raft.frame_cipher import FrameCipher, derive_key
from cortex.raft.transport import BoundedTcpConnection, frame_message, frame_payload

KEY = derive_key("s3cret-of-the-cluster")
APPEND = {
    "type": "append_entries",
    "term": 7,
    "commit_index": 41,
    "entries": [(b'[{"type":"TASK_SUBMIT","payload":{"spec":{"type":"noop"}}}]' * 40, 42, 7)],
    "prevLogIdx": 41,
    "prevLogTerm": 7,
}


class Pair:
    def __init__(self) -> None:
        self.poller = createPoller("auto")
        left, right = socket.socketpair()
        for sock in (left, right):
            sock.setblocking(False)
        self.received: list[Any] = []
        self.sender = BoundedTcpConnection(self.poller, socket=left)
        self.receiver = BoundedTcpConnection(
            self.poller, socket=right, onMessageReceived=self.received.append
        )
        self.sender.encryptor = FrameCipher(KEY)
        self.receiver.encryptor = FrameCipher(KEY)
        self.right = right

    def poll_until(self, count: int) -> list[Any]:
        deadline = time.monotonic() + 5
        while len(self.received) < count and time.monotonic() < deadline:
            self.poller.poll(0.05)
        return self.received

    def close(self) -> None:
        self.sender.disconnect()
        self.receiver.disconnect()


@pytest.fixture
def pair() -> Iterator[Pair]:
    made = Pair()
    yield made
    made.close()


def test_a_message_crosses_as_its_sealed_pickle_uncompressed() -> None:
    sealed: list[bytes] = []

    class Recording(FrameCipher):
        def encrypt_at_time(self, data: bytes, current_time: int) -> bytes:
            sealed.append(data)
            return super().encrypt_at_time(data, current_time)

    made = Pair()
    try:
        made.sender.encryptor = Recording(KEY)
        made.sender.send(APPEND)
        assert made.poll_until(1) == [APPEND]
    finally:
        made.close()
    assert sealed == [pickle.dumps(APPEND, protocol=5)]
    assert sealed[0][0] == 0x80


def test_messages_arrive_whole_and_in_order(pair: Pair) -> None:
    messages = [{"type": "next_node_idx", "next_node_idx": n, "success": True} for n in range(50)]
    messages.append(APPEND)
    for message in messages:
        pair.sender.send(message)
    assert pair.poll_until(len(messages)) == messages


def test_a_frame_compressed_by_an_older_node_is_read(pair: Pair) -> None:
    """What pysyncobj's own `send` writes: the pickle through zlib, sealed."""
    data = FrameCipher(KEY).encrypt_at_time(
        zlib.compress(pysyncobj_pickle.dumps(APPEND), 3), int(time.monotonic())
    )
    pair.sender._TcpConnection__socket.sendall(struct.pack("i", len(data)) + data)
    assert pair.poll_until(1) == [APPEND]


def test_payloads_round_trip_either_way() -> None:
    payload = frame_payload(APPEND)
    assert frame_message(payload) == APPEND
    assert frame_message(zlib.compress(payload, 3)) == APPEND
    assert len(zlib.compress(payload, 3)) < len(payload)


def test_bytes_go_as_they_are_and_a_protocol_2_frame_is_still_read() -> None:
    # A chunk of snapshot pages: bytes of every value. Protocol 2 would carry
    # it as a latin-1 string, each byte of 0x80 or more taking two.
    chunk = bytes(range(256)) * 256
    message = {"type": "append_entries", "term": 7, "serialized": {"data": chunk}}
    payload = frame_payload(message)
    assert len(payload) < len(chunk) + 256
    assert frame_message(payload) == message
    assert frame_message(pysyncobj_pickle.dumps(message)) == message


def test_bytes_cross_a_socket_as_they_were_sent(pair: Pair) -> None:
    chunk = bytes(range(256)) * 64
    message = {"type": "append_entries", "term": 7, "entries": [(chunk, 42, 7)]}
    pair.sender.send(message)
    assert pair.poll_until(1) == [message]
