"""What a node keeps in its data dir besides the state database and the Raft
files, and the checks made on it before the node starts: the secret a lone
node makes up, the members a `--join` returned, the markers of a node that
asked to join and of a removed one, and that the database is not ahead of the
journal."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path

from cortex.api.tls import ClientTls
from cortex.config import MIN_SECRET_BYTES, NodeConfig
from cortex.errors import ConfigError
from cortex.membership.joining import JoinClaim, join_proof
from cortex.raft.group import SNAPSHOT_FILE
from cortex.raft.journal import journal_last_index, write_file_durably
from cortex.raft.snapshot import snapshot_state_index

log = logging.getLogger(__name__)

_CLUSTER_FILE = "cluster.json"
_SECRET_FILE = "secret"
_REMOVED_FILE = "removed"
_JOINING_FILE = "joining.json"


def resolve_secret(config: NodeConfig, data_dir: Path) -> str:
    """A cluster of several nodes must be given its secret; a lone node makes
    one up and keeps it, so its Raft port is never open to anyone."""
    if config.secret:
        return config.secret
    if config.clustered:
        raise ConfigError(
            "config key secret: a node with --peers or --join needs the cluster secret "
            "(CORTEX_SECRET, --secret-file, CORTEX_SECRET_FILE or `secret_file:` in the "
            "config file; --secret works too but shows in `ps`)"
        )
    path = data_dir / _SECRET_FILE
    if not path.exists():
        write_private_file(path, secrets.token_urlsafe(32))
    value = path.read_text().strip()
    if len(value.encode()) < MIN_SECRET_BYTES:
        raise ConfigError(
            f"the secret this node keeps in {path} is shorter than {MIN_SECRET_BYTES} bytes; "
            "remove the file and a new one is made"
        )
    if path.stat().st_mode & 0o077:
        log.warning("%s can be read by other users than its owner: chmod 600 it", path)
    return value


def write_private_file(path: Path, content: str) -> None:
    """Writes a file only its owner can read, from its creation on (never a
    moment with a wider mode), complete or not at all: it is written under a
    temporary name and renamed into place."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)  # left over from a crash mid-write
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _join(address: str, claim: JoinClaim, secret: str, tls: ClientTls | None) -> list[str]:
    """Joins through the node at `address` (its public gRPC address): asks it
    for a challenge, then answers it with a proof of the secret."""
    from cortex.api.client import CortexClient
    from cortex.v1 import cortex_pb2 as pb

    with CortexClient(address, tls=tls or False) as client:
        nonce = client.join_challenge()
        return client.join_cluster(
            pb.JoinClusterRequest(
                node_id=claim.node_id,
                raft_address=claim.raft_address,
                grpc_address=claim.grpc_address,
                peer_address=claim.peer_address,
                nonce=nonce,
                proof=join_proof(secret, nonce, claim),
            )
        )


def initial_peers(
    config: NodeConfig, data_dir: Path, secret: str, tls: ClientTls | None, peer_address: str
) -> list[str]:
    """Static peers from config, or the members a `--join` returned (kept in
    the data dir so a restart needs no second join); never this node itself."""
    own = {config.raft_address, config.raft}
    saved = data_dir / _CLUSTER_FILE
    if saved.exists():
        return [p for p in json.loads(saved.read_text())["members"] if p not in own]
    if config.join:
        claim = JoinClaim(config.node_id, config.raft_address, config.grpc_address, peer_address)
        members = _join(config.join, claim, secret, tls)
        saved.write_text(json.dumps({"members": members}))
        return [p for p in members if p not in own]
    return [p for p in config.peers if p not in own]


def refuse_if_removed(data_dir: Path) -> None:
    marker = data_dir / _REMOVED_FILE
    if marker.exists():
        raise ConfigError(
            f"{marker.read_text().strip()}; its data dir {data_dir} cannot be started again. "
            "To add the machine back, start it with an empty --data-dir and --join"
        )


def refuse_if_state_ahead(data_dir: Path, applied_index: int) -> None:
    """The database may lag the durable journal and snapshot (replay catches it
    up) but never lead them: entries it applied that the journal lost could be
    decided differently by the cluster, and replay would skip the new ones."""
    journal = journal_last_index(str(data_dir))
    snapshot = snapshot_state_index(str(data_dir / SNAPSHOT_FILE))
    if applied_index > max(journal, snapshot):
        raise ConfigError(
            f"the state database in {data_dir} has applied raft index {applied_index}, but its"
            f" Raft journal ends at {journal} and its snapshot at {snapshot}: the journal lost"
            " entries the database already holds (a crash with raft_sync off, or files copied"
            " separately), so this node cannot safely rejoin with it. Move the data dir aside"
            " and start the node with an empty --data-dir and --join, so it catches up from a"
            " snapshot of the cluster."
        )


def joining_since(data_dir: Path) -> int | None:
    """The Raft index this data dir's node had applied when it first asked to
    join, or None if it never did: a removal of the node at a later index is
    its own; an earlier one is an old removal that its joining undoes."""
    path = data_dir / _JOINING_FILE
    if not path.exists():
        return None
    return int(json.loads(path.read_text())["since_index"])


def mark_joining(data_dir: Path, since_index: int) -> None:
    """Written durably before the node first proposes to join."""
    payload = json.dumps({"since_index": since_index}).encode()
    write_file_durably(str(data_dir / _JOINING_FILE), payload)


def mark_removed(data_dir: Path, text: str) -> None:
    """Keeps the data dir of a node taken out of its cluster from being
    started as a member again (`refuse_if_removed`)."""
    (data_dir / _REMOVED_FILE).write_text(text)
