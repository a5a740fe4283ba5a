"""Hosts in network namespaces a test or a chaos run makes itself: each host a
namespace of its own with one address on a bridge (in one more namespace,
the hub), so that a host can be cut off from the others for real (its
port on the bridge taken down: what it sends is dropped, nothing is
refused) and joined again. Nothing of this touches the machine's own
network: every address lives inside these namespaces, and deleting them
removes their links and the bridge.

The test (or `scripts/chaos.py --partitions`) stays outside. It reaches a
host's API through a relay (`python scripts/_netns.py relay`) that runs
inside the host's namespace and forwards a Unix socket (a file: seen from
every namespace) to an address there.

Needs root and iproute2's `ip` (`netns_unavailable` says why not), and
iptables to cut one link alone (`link_cuts_unavailable`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

SUBNET = "10.231.0"
# The namespaces of a `Hosts` (its test process's pid in the name).
_OURS = re.compile(r"cx(\d+)(?:hub|h\d+)")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def link_cuts_unavailable() -> str | None:
    """Why one link between two hosts cannot be cut here (`Hosts.link_cut`
    needs iptables), or None when it can."""
    return None if shutil.which("iptables") else "iptables is not installed"


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = f"cxprobe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as err:
        detail = getattr(err, "stderr", b"") or b""
        return f"`ip netns add` failed: {detail.decode(errors='replace').strip() or err}"
    _ip("netns", "del", probe)
    return None


class Hosts:
    """`count` hosts, `SUBNET`.1 to .count, on one bridge."""

    def __init__(self, count: int) -> None:
        self.count = count
        tag = f"cx{os.getpid()}"
        self._hub = f"{tag}hub"
        self._names = [f"{tag}h{k}" for k in range(1, count + 1)]
        self._made: list[str] = []
        self._relays: list[subprocess.Popen[bytes]] = []
        # The relays' Unix sockets: a socket's path holds at most 107 bytes,
        # so they go in a short directory of their own.
        self._sockets: Path | None = None

    def __enter__(self) -> Hosts:
        try:
            self._up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _up(self) -> None:
        _remove_stale()
        _ip("netns", "add", self._hub)
        self._made.append(self._hub)
        _ip("-n", self._hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self._hub, "link", "set", "br0", "up")
        for k, name in enumerate(self._names, start=1):
            _ip("netns", "add", name)
            self._made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
            port = f"p{k}"
            _ip("link", "add", "eth0", "netns", name, "type", "veth",
                "peer", "name", port, "netns", self._hub)  # fmt: skip
            _ip("-n", self._hub, "link", "set", port, "master", "br0")
            _ip("-n", self._hub, "link", "set", port, "up")
            _ip("-n", name, "addr", "add", f"{self.address(k)}/24", "dev", "eth0")
            _ip("-n", name, "link", "set", "eth0", "up")

    def address(self, k: int) -> str:
        """Host k's address (k from 1)."""
        return f"{SUBNET}.{k}"

    def wrapper(self, k: int) -> list[str]:
        """The command prefix that runs a program on host k."""
        return ["ip", "netns", "exec", self._names[k - 1]]

    @contextlib.contextmanager
    def cut_off(self, k: int) -> Iterator[None]:
        """While inside, host k reaches no other host, nor they it: its port
        on the bridge is down, and what crosses it is dropped."""
        _ip("-n", self._hub, "link", "set", f"p{k}", "down")
        try:
            yield
        finally:
            _ip("-n", self._hub, "link", "set", f"p{k}", "up")

    @contextlib.contextmanager
    def link_cut(self, a: int, b: int) -> Iterator[None]:
        """While inside, hosts a and b cannot reach each other (what either
        sends the other is dropped, on host a); each still reaches the rest."""
        self._link_rules(a, b, "-A")
        try:
            yield
        finally:
            self._link_rules(a, b, "-D")

    def _link_rules(self, a: int, b: int, action: str) -> None:
        other = self.address(b)
        for chain, side in (("INPUT", "-s"), ("OUTPUT", "-d")):
            subprocess.run(
                [*self.wrapper(a), "iptables", action, chain, side, other, "-j", "DROP"],
                check=True,
                capture_output=True,
                timeout=30,
            )

    def relay(self, k: int, target: str) -> str:
        """Starts a relay on host k from a Unix socket to `target` (host:port
        there); returns the gRPC address of the socket."""
        if self._sockets is None:
            self._sockets = Path(tempfile.mkdtemp(prefix="cx"))
        socket_path = self._sockets / f"{k}-{len(self._relays)}.sock"
        command = [sys.executable, os.path.abspath(__file__), "relay", str(socket_path), target]
        process = subprocess.Popen(
            [*self.wrapper(k), *command],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._relays.append(process)
        deadline = time.monotonic() + 15
        while not socket_path.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the relay to {target} on host {k} did not start")
            time.sleep(0.02)
        return f"unix:{socket_path}"

    def close(self) -> None:
        for process in self._relays:
            process.kill()
            process.wait(10)
        self._relays = []
        if self._sockets is not None:
            shutil.rmtree(self._sockets, ignore_errors=True)
            self._sockets = None
        for name in reversed(self._made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._made = []


def _remove_stale() -> None:
    """Removes the namespaces (and kills the processes in them) of test
    processes that died without removing them."""
    listed = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=30
    ).stdout
    for line in listed.splitlines():
        name = line.split(" ", 1)[0]
        ours = _OURS.fullmatch(name)
        if ours is None or _alive(int(ours.group(1))):
            continue
        pids = subprocess.run(
            ["ip", "netns", "pids", name], capture_output=True, text=True, timeout=30
        ).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- the relay (inside a host's namespace) ------------------------------------------


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve_one(client: socket.socket, target: tuple[str, int]) -> None:
    try:
        upstream = socket.create_connection(target, timeout=10)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def relay(socket_path: str, target: str) -> None:
    host, _, port = target.rpartition(":")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve_one, args=(client, (host, int(port))), daemon=True).start()


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3 or argv[0] != "relay":
        print("usage: python scripts/_netns.py relay SOCKET_PATH HOST:PORT", file=sys.stderr)
        return 2
    relay(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
