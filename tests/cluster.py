"""A harness for real multi-process clusters: every node is a separate
`cortex node start` process on loopback TCP with its own data dir."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cortex.api.client import CortexClient
from cortex.api.tls import client_tls
from cortex.errors import CortexError
from cortex.v1 import cortex_pb2 as pb
from tests.tls import TlsFiles

T = TypeVar("T")
SECRET = "test-cluster-secret"


_handed_out: set[int] = set()


# Below the kernel's ephemeral range (32768 and up by default) and the ports
# `cortex demo` scans from (17100): a port handed out here is never taken in
# the meantime by a listener on port 0 (a node's peer listener) or by the
# local end of a connection.
_PORTS = range(10_000, 17_000)
_port_choice = random.Random()
# Where `cortex dev` and `cortex demo` clusters of the tests take their blocks
# of ports (raft from the base, gRPC at +100, HTTP at +200).
_BASE_PORTS = range(20_000, 32_000)


def worker_share(ports: range) -> range:
    """This test process's own slice of `ports`: under pytest-xdist each
    worker (gw0, gw1, ...) hands out ports from a slice no other worker uses,
    since the check that a port is free cannot see another process's plans."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if not worker.startswith("gw") or count <= 1:
        return ports
    size = len(ports) // count
    start = ports.start + int(worker[2:]) * size
    return range(start, start + size)


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port(count: int) -> int:
    """A base port for a `count`-node local cluster whose raft (base+i), gRPC
    (base+100+i) and HTTP (base+200+i) ports are all free."""
    share = worker_share(_BASE_PORTS)
    for _ in range(200):
        base = _port_choice.randrange(share.start, share.stop - 200 - count)
        if all(port_free(base + offset + i) for i in range(count) for offset in (0, 100, 200)):
            return base
    raise AssertionError("no free block of ports for a local cluster")


def free_ports(count: int) -> list[int]:
    """Ports free right now and never handed out before in this process: two
    nodes given the same port would both bind it (gRPC sets SO_REUSEPORT)."""
    sockets, ports = [], []
    while len(ports) < count:
        port = _port_choice.choice(worker_share(_PORTS))
        if port in _handed_out:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        sockets.append(s)
        _handed_out.add(port)
        ports.append(port)
    for s in sockets:
        s.close()
    return ports


def wait_until(
    check: Callable[[], T], timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> T:
    """Polls `check` until it returns something truthy; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except CortexError as err:
            last_error = err
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what or check}: last error {last_error}"
    )


@dataclass
class ClusterNode:
    node_id: str
    raft: str
    grpc: str
    data_dir: Path
    # The HTTP listener (metrics); each node gets its own, so nodes of tests
    # run side by side never meet on the default port.
    http: str = ""
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    api_token: str | None = None
    # The node's certificate and CA, which clients then use as well.
    tls: TlsFiles | None = None
    # Where its log goes when not beside its data dir.
    log_file: Path | None = None
    # How python runs `cortex` (e.g. through a test hook).
    launcher: list[str] = field(default_factory=lambda: ["-m", "cortex.cli.main"])
    # What runs the node's python (e.g. `ip netns exec NAME`), and the
    # address its API listens on when clients reach it at another
    # (`grpc`, e.g. a relay's Unix socket into its network namespace).
    wrapper: list[str] = field(default_factory=list)
    grpc_listen: str = ""

    @property
    def log_path(self) -> Path:
        return self.log_file or self.data_dir.parent / f"{self.node_id}.log"

    def start(
        self, peers: list[str] | None = None, join: str | None = None, secret: str | None = SECRET
    ) -> None:
        args = [
            *self.wrapper, sys.executable, *self.launcher, "node", "start",
            "--node-id", self.node_id, "--data-dir", str(self.data_dir),
            "--raft", self.raft, "--grpc", self.grpc_listen or self.grpc,
        ]  # fmt: skip
        if self.http:
            args += ["--http", self.http]
        if peers:
            args += ["--peers", ",".join(peers)]
        if join:
            args += ["--join", join]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if secret:
            # As the README advises: in a file, not on the command line.
            secret_path = write_secret(self.data_dir.parent / f"{self.node_id}.secret", secret)
            args += ["--secret-file", str(secret_path)]
        args += self.extra_args
        log = open(self.log_path, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
            start_new_session=True,
        )
        log.close()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill9(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        if not self.alive:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def client(self, timeout_s: float = 30.0, route_writes: bool = True) -> CortexClient:
        tls = None
        if self.tls is not None:
            tls = client_tls(str(self.tls.ca), cert=str(self.tls.cert), key=str(self.tls.key))
        return CortexClient(
            self.grpc,
            timeout_s=timeout_s,
            token=self.api_token or "",
            tls=tls,
            route_writes=route_writes,
        )

    def status(self) -> pb.GetClusterStatusResponse:
        with self.client(timeout_s=5) as c:
            return c.get_cluster_status()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Cluster:
    def __init__(
        self,
        root: Path,
        size: int,
        extra_args: list[str] | None = None,
        api_token: str | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        """With `tls`, nodes serve with its certificate and trust its CA, and
        so do the clients `ClusterNode.client` makes."""
        self.root = root
        self.nodes: list[ClusterNode] = []
        self.api_token = api_token
        self.tls = tls
        token_args = []
        if api_token:
            root.mkdir(parents=True, exist_ok=True)
            token_args = ["--api-token-file", str(write_secret(root / "api-token", api_token))]
        self._extra_args = [*(extra_args or []), *token_args, *(tls.node_args() if tls else [])]
        for _ in range(size):
            self.add_node()

    def add_node(self, extra_args: list[str] | None = None) -> ClusterNode:
        raft_port, grpc_port, http_port = free_ports(3)
        number = len(self.nodes) + 1
        node = ClusterNode(
            node_id=f"n{number}",
            raft=f"127.0.0.1:{raft_port}",
            grpc=f"127.0.0.1:{grpc_port}",
            http=f"127.0.0.1:{http_port}",
            data_dir=self.root / f"n{number}",
            extra_args=[*self._extra_args, *(extra_args or [])],
            api_token=self.api_token,
            tls=self.tls,
        )
        self.nodes.append(node)
        return node

    @property
    def peers(self) -> list[str]:
        return [n.raft for n in self.nodes]

    def start(self, nodes: list[ClusterNode] | None = None) -> Cluster:
        peers = self.peers
        for node in nodes or self.nodes:
            node.start(peers=peers)
        return self

    def wait_ready(self, nodes: list[ClusterNode] | None = None, timeout: float = 60.0) -> None:
        nodes = nodes or [n for n in self.nodes if n.alive]
        expected = len(nodes)

        def ready() -> bool:
            for node in nodes:
                status = node.status()
                if (
                    not status.leader_raft_address
                    or len([n for n in status.nodes if n.status == pb.NODE_STATUS_ACTIVE])
                    < expected
                ):
                    return False
            return True

        wait_until(ready, timeout, what="cluster ready")

    def leader(self) -> ClusterNode:
        def find() -> ClusterNode | None:
            for node in self.nodes:
                if node.alive and node.status().raft_role == pb.RAFT_ROLE_LEADER:
                    return node
            return None

        return wait_until(find, 30, what="a leader")

    def followers(self) -> list[ClusterNode]:
        leader = self.leader()
        return [n for n in self.nodes if n.alive and n is not leader]

    def wait_converged(
        self, nodes: list[ClusterNode] | None = None, timeout: float = 60.0
    ) -> tuple[str, int]:
        """Waits until the given (default: live) nodes report the same applied
        index and state digest; returns them."""
        nodes = nodes or [n for n in self.nodes if n.alive]

        def same() -> tuple[str, int] | None:
            statuses = [n.status() for n in nodes]
            digests = {(s.state_digest, s.raft_last_applied) for s in statuses}
            if len(digests) == 1 and statuses[0].commit_index <= statuses[0].raft_last_applied:
                return next(iter(digests))
            return None

        return wait_until(same, timeout, interval=0.2, what="digests to converge")

    def wait_level(self, node: ClusterNode, timeout: float = 90.0) -> tuple[str, int]:
        """`wait_converged`, and `node` still level when asked alone: a
        restarted node announces itself again (NODE_JOIN), and that entry
        may land just after the nodes first agree, moving every digest."""

        def level() -> tuple[str, int] | None:
            agreed = self.wait_converged(timeout=timeout)
            status = node.status()
            return agreed if (status.state_digest, status.raft_last_applied) == agreed else None

        return wait_until(level, timeout, what=f"{node.node_id} to converge with the others")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def kill_all(self) -> None:
        for node in self.nodes:
            if node.alive:
                node.kill9()

    def dump_logs(self) -> str:
        return "\n".join(f"===== {n.node_id} =====\n{n.log_text()[-6000:]}" for n in self.nodes)


def shared_cluster(
    tmp_path_factory: Any, request: Any, name: str, size: int = 3
) -> Iterator[Cluster]:
    """A module fixture's cluster: started and ready, its nodes' logs printed
    if a test using it failed, killed at the end."""
    yield from serve_cluster(Cluster(tmp_path_factory.mktemp(name), size), request)


def serve_cluster(cluster: Cluster, request: Any) -> Iterator[Cluster]:
    """Runs a cluster configured by a module fixture: starts it, waits until
    it is ready, yields it, prints its nodes' logs if a test using it failed,
    and kills it at the end."""
    failed_before = request.session.testsfailed
    cluster.start()
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        if request.session.testsfailed > failed_before:
            print(cluster.dump_logs())
        cluster.kill_all()


def wait_writes_reach_leader(client: Any, leader: ClusterNode, what: str) -> None:
    """Submits noop tasks through `client` until the leader answers one (the
    client routes its writes there once connected), then checks the client
    names the leader's address."""
    wait_until(
        lambda: client.submit_task(shell_spec("true")).header.node_id == leader.node_id,
        30,
        what=what,
    )
    assert client.leader_address == leader.grpc


def write_secret(path: Path, value: str) -> Path:
    """A file only its owner reads, holding `value`."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return path


def shell_spec(command: list[str] | str, **fields: Any) -> pb.TaskSpec:
    spec = pb.TaskSpec(**fields)
    if isinstance(command, str):
        spec.shell = command
    else:
        spec.command.extend(command)
    return spec


def pid_alive(pid: int) -> bool:
    """Whether `pid` is running; a zombie (exited, not yet reaped) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def state_rows(node: ClusterNode, query: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
    """The rows `query` reads from the node's own SQLite file (read only)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{node.data_dir / 'state.db'}?mode=ro", uri=True)
    try:
        return conn.execute(query, parameters).fetchall()
    finally:
        conn.close()


def completion_counts(node: ClusterNode) -> dict[str, int]:
    """Completion events per task, read from the node's own SQLite file."""
    return dict(
        state_rows(
            node,
            "SELECT task_id, COUNT(*) FROM task_events WHERE event = 'completed' GROUP BY task_id",
        )
    )
