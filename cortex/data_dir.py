"""What a node keeps in its data dir besides the state database and the Raft
files, and the checks made on it before the node starts: the secret a lone
node makes up, the members a `--join` returned, the markers of a node that
asked to join and of a removed one, its role (voter or observer, fixed for
the data dir), and that the database is not ahead of the journal."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path

from cortex.api.tls import ClientTls
from cortex.config import MIN_SECRET_BYTES, NodeConfig
from cortex.errors import ConfigError
from cortex.membership.joining import JoinClaim
from cortex.raft.group import SNAPSHOT_FILE
from cortex.raft.journal import journal_last_index, write_file_durably
from cortex.raft.snapshot import snapshot_state_index

log = logging.getLogger(__name__)

_CLUSTER_FILE = "cluster.json"
_SECRET_FILE = "secret"
_REMOVED_FILE = "removed"
_JOINING_FILE = "joining.json"
_ROLE_FILE = "role"
_ARTICLE = {"voter": "a voter", "observer": "an observer"}
# What a data dir holds once its node has taken part in a cluster.
_STATE_FILES = ("state.db", "raft.log", SNAPSHOT_FILE, _CLUSTER_FILE)


def make_data_dir(configured: str) -> Path:
    """The node's data dir as an absolute path, made if it is missing;
    ConfigError naming the problem when it cannot be made or written."""
    path = Path(configured).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"config key data_dir: {path} is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"config key data_dir: cannot make {path}: {err.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"config key data_dir: this user cannot write in {path}")
    return path


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
    from cortex.api.join_client import JoinClient

    with JoinClient(address, secret, tls) as client:
        return client.join(claim)


def initial_peers(
    config: NodeConfig, data_dir: Path, secret: str, tls: ClientTls | None, peer_address: str
) -> list[str]:
    """Static peers from config, or the members a `--join` returned (kept in
    the data dir so a restart needs no second join); never this node itself.
    An observer joins with no Raft address and gets the voters."""
    # An observer has no Raft address of its own: `raft` is unused.
    own = set() if config.observer else {config.raft_address, config.raft}
    saved = data_dir / _CLUSTER_FILE
    if saved.exists():
        return [p for p in json.loads(saved.read_text())["members"] if p not in own]
    if config.join:
        claim = JoinClaim(
            config.node_id,
            "" if config.observer else config.raft_address,
            config.grpc_address,
            peer_address,
            role="observer" if config.observer else "voter",
        )
        members = _join(config.join, claim, secret, tls)
        saved.write_text(json.dumps({"members": members}))
        return [p for p in members if p not in own]
    return [p for p in config.peers if p not in own]


def check_role(data_dir: Path, observer: bool) -> None:
    """A data dir belongs to a voter or to an observer for good: an observer's
    journal was never a member's (no votes, no acknowledgements counted), and
    a voter's must not go on without its vote. Data dirs from before observers
    existed are voters'. One that holds no state yet takes the role asked for."""
    wanted = "observer" if observer else "voter"
    marker = data_dir / _ROLE_FILE
    holds_state = any((data_dir / name).exists() for name in _STATE_FILES)
    current = marker.read_text().strip() if marker.exists() else None
    if current is None and holds_state:
        current = "voter"
    if current is not None and current != wanted and holds_state:
        flag = "with" if current == "observer" else "without"
        raise ConfigError(
            f"the data dir {data_dir} belongs to a node that is {_ARTICLE[current]}, so it"
            f" cannot start as {_ARTICLE[wanted]}: a node keeps its role for its data dir."
            f" Start it {flag} --observer, or as {_ARTICLE[wanted]} with an empty --data-dir"
            " and --join"
        )
    if current != wanted or not marker.exists():
        write_file_durably(str(marker), f"{wanted}\n".encode())


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
