"""Runs `cortex` with a wiretap on its node-to-node calls, as an attacker on
the network would see them: every heartbeat it sends (request bytes and
metadata) and its join exchange are appended to a capture file before they
go out, so a test can replay them byte for byte later.

Use: `python -c "import tests.peer_capture as c; c.main()" node start ...`
with `CORTEX_TEST_CAPTURE` naming the capture file."""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CAPTURE_ENV = "CORTEX_TEST_CAPTURE"
LAUNCHER = ["-c", "import tests.peer_capture as c; c.main()"]
_lock = threading.Lock()


def _record(kind: str, address: str, payload: bytes, metadata: Any = ()) -> None:
    line = {
        "kind": kind,
        "address": address,
        "payload": base64.b64encode(payload).decode(),
        "metadata": [list(pair) for pair in metadata],
    }
    with _lock, open(os.environ[CAPTURE_ENV], "a") as capture:
        capture.write(json.dumps(line) + "\n")
        capture.flush()


def install() -> None:
    import cortex.api.join_client as join_client
    import cortex.api.peer_client as peer_client
    from cortex.api.peer_convert import heartbeat_to_proto

    heartbeat = peer_client.PeerClient.heartbeat

    def tapped_heartbeat(self: Any, address: str, report: Any, timeout_s: float) -> Any:
        message = heartbeat_to_proto(report).SerializeToString()
        _record("heartbeat", address, message, self._metadata)
        return heartbeat(self, address, report, timeout_s)

    join_cluster = join_client.JoinClient.join_cluster

    def tapped_join(self: Any, request: Any) -> list[str]:
        _record("join", self.address, request.SerializeToString(), self._metadata)
        return join_cluster(self, request)

    peer_client.PeerClient.heartbeat = tapped_heartbeat  # type: ignore[method-assign]
    join_client.JoinClient.join_cluster = tapped_join  # type: ignore[method-assign]


def main() -> None:
    install()
    from cortex.cli.main import main as cortex_main

    sys.exit(cortex_main(sys.argv[1:]))


@dataclass(frozen=True)
class Captured:
    kind: str
    address: str
    payload: bytes
    metadata: tuple[tuple[str, str], ...]


def read_capture(path: Path) -> list[Captured]:
    if not path.exists():
        return []
    captured = []
    for line in path.read_text().splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        captured.append(
            Captured(
                item["kind"],
                item["address"],
                base64.b64decode(item["payload"]),
                tuple((str(k), str(v)) for k, v in item["metadata"]),
            )
        )
    return captured
