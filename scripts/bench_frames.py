"""What a Raft frame costs: one message sent and received over a local
socket pair by two of the Raft port's connections (sealed with the cluster
cipher), as Cortex sends it (the pickle as it is) and as pysyncobj's own
`send` does (the pickle, of protocol 2, through zlib). Prints CPU
microseconds per frame, send and receive together, for an acknowledgement,
a small append, and a 64 KiB piece of a large entry and of a snapshot.

    python scripts/bench_frames.py
    python scripts/bench_frames.py --frames 20000 --json
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import time
from typing import Any

from pysyncobj.poller import createPoller
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection

from cortex.raft.frame_cipher import FrameCipher, derive_key
from cortex.raft.transport import BoundedTcpConnection

KEY = derive_key("bench-frames")
MESSAGES: dict[str, Any] = {
    "ack": {"type": "next_node_idx", "next_node_idx": 123456, "reset": False, "success": True},
    "append_2kb": {
        "type": "append_entries",
        "term": 7,
        "commit_index": 123455,
        "entries": [(b'{"type":"TASK_SUBMIT","payload":{"spec":{"type":"noop"}}}' * 40, 123456, 7)],
        "prevLogIdx": 123455,
        "prevLogTerm": 7,
    },
    # A piece of a large entry (a batch of hundreds of tasks: JSON) and of a
    # snapshot (database pages: bytes of every value), each as pysyncobj
    # splits them, 64 KiB to a frame.
    "entry_chunk_64kb": {
        "type": "append_entries",
        "term": 7,
        "commit_index": 123455,
        "entries": [
            (b'{"type":"TASK_SUBMIT","payload":{"spec":{"type":"noop"}}}' * 1130, 123456, 7)
        ],
        "prevLogIdx": 123455,
        "prevLogTerm": 7,
    },
    "snapshot_chunk_64kb": {
        "type": "append_entries",
        "term": 7,
        "commit_index": 123455,
        "serialized": (random.Random(7).randbytes(64 * 1024), False, False),
    },
}


# A connection drops itself when it has read nothing for its timeout (10 s
# by default), checked as it sends: the sender here only sends, so a long
# measurement would lose it. None of these waits should come near this.
CONNECTION_TIMEOUT_S = 24 * 3600.0
# The longest wait for one frame to arrive before the measurement gives up.
FRAME_WAIT_S = 10.0


def _wait_for_frame(poller: Any, received: list[Any], connections: tuple[Any, ...]) -> None:
    """Polls until a frame has arrived; raises when a connection dropped or
    none arrived within `FRAME_WAIT_S`."""
    deadline = time.monotonic() + FRAME_WAIT_S
    while not received:
        if any(c.state == CONNECTION_STATE.DISCONNECTED for c in connections):
            raise RuntimeError("a connection dropped while a frame was on its way")
        if time.monotonic() > deadline:
            raise RuntimeError(f"a frame did not arrive within {FRAME_WAIT_S:g} s")
        poller.poll(0.1)


def _frame_us(message: Any, frames: int, compressed: bool) -> float:
    poller = createPoller("auto")
    left, right = socket.socketpair()
    for sock in (left, right):
        sock.setblocking(False)
    received: list[Any] = []
    sender = BoundedTcpConnection(poller, socket=left, timeout=CONNECTION_TIMEOUT_S)
    receiver = BoundedTcpConnection(
        poller, socket=right, onMessageReceived=received.append, timeout=CONNECTION_TIMEOUT_S
    )
    sender.encryptor = FrameCipher(KEY)
    receiver.encryptor = FrameCipher(KEY)
    send = (lambda m: TcpConnection.send(sender, m)) if compressed else sender.send
    connections = (sender, receiver)
    try:
        # A small frame first, as a node's first is the key exchange: until
        # one opens, the receiver takes frames of at most 64 KiB.
        send(MESSAGES["ack"])
        _wait_for_frame(poller, received, connections)
        received.clear()
        started = time.process_time()
        for _ in range(frames):
            send(message)
            _wait_for_frame(poller, received, connections)
            received.clear()  # each frame is dropped once it is in
        return (time.process_time() - started) / frames * 1e6
    finally:
        sender.disconnect()
        receiver.disconnect()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=5000, help="frames per measurement")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    figures = {
        name: {
            "uncompressed_us": round(_frame_us(message, args.frames, False), 1),
            "zlib_us": round(_frame_us(message, args.frames, True), 1),
        }
        for name, message in MESSAGES.items()
    }
    if args.json:
        print(json.dumps(figures))
        return 0
    for name, costs in figures.items():
        print(
            f"{name:19} as sent: {costs['uncompressed_us']:6.1f} us per frame;"
            f" through zlib (pysyncobj's send): {costs['zlib_us']:6.1f} us"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
