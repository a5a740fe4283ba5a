"""Node configuration: a YAML file, overridden by `CORTEX_*` environment
variables, overridden by command-line flags; validated, with errors that name
the offending key and where it came from."""

from __future__ import annotations

import json
import os
import shlex
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from cortex.defaults import (
    DEFAULT_GRPC_ADDRESS,
    DEFAULT_HTTP_PORT,
    DEFAULT_RAFT_PORT,
    read_secret_file,
)
from cortex.errors import ConfigError

MIN_SECRET_BYTES = 16
# The default range of the Raft election timeout, in seconds; the shortest
# is also the least a node may be given. The longest must exceed the
# shortest by `ELECTION_TIMEOUT_SPREAD_S` at least, so voters whose leader
# went silent stand one after another rather than all at once.
ELECTION_TIMEOUT_MIN_S = 0.4
ELECTION_TIMEOUT_MAX_S = 1.4
ELECTION_TIMEOUT_SPREAD_S = 0.2
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Keys whose value may instead come from a file (`KEY_file`), so it stays
# out of `ps` and shell history.
SECRET_FILE_KEYS = {"secret": "secret_file", "api_token": "api_token_file"}
# Hosts that mean "every interface": fine to listen on, useless to dial.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", "*"})


def check_address(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT")
    return value


_BYTE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2,
               "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3}  # fmt: skip


def parse_byte_size(value: str) -> int:
    """`4096`, `64KiB`, `256MB`, `4GiB` (binary units are 1024-based)."""
    text = value.strip().lower().replace(" ", "")
    number = text.rstrip("kmgib")
    unit = text[len(number) :]
    if unit not in _BYTE_UNITS or not number.replace(".", "", 1).isdigit():
        raise ValueError(f"{value!r} is not a size such as 4096, 64KiB, 256MiB or 4GiB")
    return int(float(number) * _BYTE_UNITS[unit])


class DeclaredGpu(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "declared GPU"
    memory_mb: float = Field(0, ge=0)


class DeclaredResources(BaseModel):
    """Resources a node reports from configuration instead of measuring them
    (as Nomad client config does); reported as declared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_cores: float | None = Field(None, gt=0)
    memory_mb: float | None = Field(None, ge=0)
    disk_gb: float | None = Field(None, ge=0)
    bandwidth_mbps: float | None = Field(None, gt=0)
    gpu: DeclaredGpu | None = None
    gaming: bool | None = None


class NodeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    node_id: str = Field(default_factory=socket.gethostname, min_length=1, max_length=128)
    data_dir: str = "./cortex-data"
    raft: str = f"127.0.0.1:{DEFAULT_RAFT_PORT}"
    grpc: str = DEFAULT_GRPC_ADDRESS
    # The listener for node-to-node calls (heartbeats, output relays), apart
    # from clients. Unset: a free port on the gRPC host, chosen at start.
    peer: str | None = None
    # The HTTP listener serving Prometheus metrics (`/metrics`), with the
    # API token and TLS of the gRPC API.
    http: str = f"127.0.0.1:{DEFAULT_HTTP_PORT}"
    # The host other nodes and clients reach this node at, when `raft`,
    # `grpc`, `peer` or `http` listen on a wildcard address such as 0.0.0.0.
    advertise: str | None = Field(None, validate_default=True)
    peers: list[str] = Field(default_factory=list)
    join: str | None = None
    # A read replica: joins through `join`, replicates the log without a
    # vote, runs no tasks and listens on no Raft port (`raft` is unused).
    observer: bool = Field(False, validate_default=True)
    secret: str | None = None
    # When set, every API call must carry it (Authorization: Bearer ...).
    api_token: str | None = Field(None, min_length=8)
    # Files holding the secret or the API token; `load_config` reads them
    # into `secret` and `api_token` (one or the other, never both).
    secret_file: str | None = None
    api_token_file: str | None = None
    # Names (or patterns such as AWS_*) of the node's environment variables
    # tasks inherit, besides PATH, HOME, locale and the like; secrets never.
    env_passthrough: list[str] = Field(default_factory=list)
    # gRPC over TLS: the node serves with tls_cert and tls_key (PEM files, both
    # or neither) and verifies the nodes it calls against tls_ca (default: the
    # system roots). tls_client_auth also requires callers to present a
    # certificate tls_ca signed (mutual TLS).
    tls_cert: str | None = None
    tls_key: str | None = Field(None, validate_default=True)
    tls_ca: str | None = None
    tls_client_auth: bool = Field(False, validate_default=True)
    labels: dict[str, str] = Field(default_factory=dict)
    capabilities: dict[str, str] = Field(default_factory=dict)
    resources: DeclaredResources = Field(default_factory=DeclaredResources)
    heartbeat_interval_s: float = Field(2.0, gt=0, le=60)
    failure_timeout_s: float = Field(15.0, gt=0, le=3600)
    # A follower that hears nothing from the leader for a time drawn between
    # these stands for election. The floor is the default: the leader's
    # batches are bounded so that applying one stays well under it.
    election_timeout_min_s: float = Field(ELECTION_TIMEOUT_MIN_S, ge=ELECTION_TIMEOUT_MIN_S, le=60)
    election_timeout_max_s: float = Field(ELECTION_TIMEOUT_MAX_S, le=120, validate_default=True)
    shutdown_drain_s: float = Field(10.0, ge=0, le=3600)
    gaming_processes: list[str] = Field(
        default_factory=lambda: ["steam", "steamwebhelper", "gameoverlayui", "epicgameslauncher"]
    )
    # The task types this node runs (None: every installed executor); of
    # those, each whose fingerprint finds what it needs on this node.
    executors: list[str] | None = None
    # The container executor's runtime: podman or docker (unset: whichever
    # is on PATH, podman first).
    container_runtime: Literal["podman", "docker"] | None = None
    # Host paths (and what lies under them) a container task may mount.
    container_mounts: list[str] = Field(default_factory=list)
    # The agent CLI a subagent task runs, its prompt on stdin (a list, or a
    # string split as a shell would); unset: no subagent tasks here.
    subagent_command: list[str] = Field(default_factory=list)
    # Where the k8s_job executor finds its Kubernetes cluster: kubeconfig
    # (path), context, namespace (default "default").
    k8s: dict[str, Any] = Field(default_factory=dict)
    # Settings of executors from other packages, a table per task type.
    executor_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    max_tasks: int = Field(64, ge=1, le=100_000)
    # Tasks this node takes beyond `max_tasks` while every node is full, each
    # started here as one of its running tasks ends, without waiting for the
    # log to carry the end to the leader and a new assignment back (unset:
    # half of `max_tasks`; `waiting_tasks`).
    prefetch_tasks: int | None = Field(None, ge=0, le=100_000)
    max_spec_bytes: int = Field(1024 * 1024, ge=1024)
    scheduler_interval_s: float = Field(1.0, gt=0, le=60)
    compaction_min_entries: int = Field(5000, ge=10)
    # Sync the Raft journal before acknowledging an append. `false` may lose
    # acknowledged writes on power loss: for throwaway clusters only.
    raft_sync: bool = True
    # Run the node's threads under SCHED_BATCH on Linux (`cortex.cpu_policy`):
    # no preemption each time one thread wakes another, but none of other
    # processes either, so only where nothing else keeps the CPUs busy.
    sched_batch: bool = False
    compaction_min_time_s: float = Field(300.0, gt=0)
    # Once the last snapshot is past 64 MiB, compaction also waits for the
    # journal to reach this fraction of its size (cortex.raft.compaction).
    compaction_log_ratio: float = Field(0.5, ge=0, le=100)
    kill_grace_s: float = Field(5.0, ge=0)
    propose_timeout_s: float = Field(10.0, gt=0)
    log_level: str = "INFO"
    # Task output kept on the executing node; oldest removed first.
    output_max_bytes_per_attempt: int = Field(256 * 1024**2, ge=1024**2)
    output_max_total_bytes: int = Field(4 * 1024**3, ge=1024**2)
    # Client calls a node serves at once, streams and waits included; its
    # public gRPC server has this many threads and a few more for health
    # checks and refusals. Beyond it: RESOURCE_EXHAUSTED with a retry hint.
    max_inflight_requests: int = Field(56, ge=1, le=10_000)
    # Output and event streams a node serves at once (each holds a gRPC
    # thread), to clients and, separately, to nodes relaying them.
    max_streams: int = Field(32, ge=1, le=1024)
    # GetTaskResult calls with `wait` a node holds at once (each holds a thread).
    max_waits: int = Field(16, ge=1, le=10_000)
    # How far the nodes' clocks may disagree: a heartbeat sent (by its
    # sender's clock) more than this plus one heartbeat interval before or
    # after the receiver's clock is refused, so a captured one cannot be
    # replayed later.
    max_clock_skew_s: float = Field(5.0, gt=0, le=3600)
    # How long finished tasks and workflows (not dead letters) and node events
    # are kept before the leader purges them from the replicated state; 0 keeps
    # everything.
    task_retention_s: float = Field(7 * 24 * 3600.0, ge=0)
    # Tasks one purge entry removes at most (apply accepts up to 10 000). An
    # entry is applied in one go on every node, so this stays at the
    # proposer's most tasks in a batch (`cortex.raft.proposer.MAX_BATCH_TASKS`).
    purge_batch_size: int = Field(128, ge=1, le=10_000)
    purge_interval_s: float = Field(30.0, gt=0, le=3600)
    # Workflow conditions (evaluated on the leader): the JSON a condition's
    # input may take (upstream outputs are cut to fit, keeping their ends),
    # and how many sandbox processes may evaluate conditions at once.
    condition_input_max_bytes: int = Field(1024**2, ge=64 * 1024, le=4 * 1024**2)
    condition_workers_max: int = Field(4, ge=1, le=64)
    # Where OpenTelemetry spans go: `otlp` (the OTEL_EXPORTER_OTLP_* variables
    # say where), `otlp:http://HOST:4318`, or `file:PATH` (JSON lines).
    # Unset: no tracing. Needs the `otel` extra.
    otel_exporter: str | None = None

    @field_validator("condition_input_max_bytes", mode="before")
    @classmethod
    def _condition_input_size(cls, value: Any) -> Any:
        return parse_byte_size(value) if isinstance(value, str) else value

    @field_validator("otel_exporter")
    @classmethod
    def _exporter(cls, value: str | None) -> str | None:
        from cortex.tracing.exporter_setting import parse_exporter_setting

        parse_exporter_setting(value)
        return value.strip() if value and value.strip() else None

    @field_validator("output_max_bytes_per_attempt", "output_max_total_bytes", mode="before")
    @classmethod
    def _byte_size(cls, value: Any) -> Any:
        return parse_byte_size(value) if isinstance(value, str) else value

    @field_validator("raft", "grpc", "http", "join")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return None if value is None else check_address(value)

    @field_validator("peer")
    @classmethod
    def _peer_listen(cls, value: str | None) -> str | None:
        if value is None:
            return None
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"{value!r} is not HOST:PORT (port 0: any free port)")
        return value

    @field_validator("advertise")
    @classmethod
    def _advertised_host(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            value = value.strip()
            bare_ipv6 = value.count(":") > 1 and not value.startswith("[")
            if not value or value in WILDCARD_HOSTS or " " in value:
                raise ValueError(f"{value!r} is not a host other nodes can reach")
            if bare_ipv6 or (":" in value and not value.endswith("]")):
                raise ValueError(
                    f"{value!r}: give a host name or IP without a port ([...] around IPv6)"
                )
            return value
        for key in ("raft", "grpc", "peer", "http"):
            host = str(info.data.get(key) or "").rpartition(":")[0]
            if host in WILDCARD_HOSTS:
                raise ValueError(
                    f"missing: {key} listens on {host}, so other nodes need the host name "
                    "or IP they reach this node at (--advertise HOST)"
                )
        return value

    @field_validator("observer")
    @classmethod
    def _observer_joins(cls, value: bool, info: ValidationInfo) -> bool:
        if not value:
            return value
        if info.data.get("peers"):
            raise ValueError(
                "an observer cannot be given peers (a static group lists its voters): start it"
                " with --join HOST:PORT, the gRPC address of a node of the running cluster"
            )
        if "join" in info.data and not info.data["join"]:
            raise ValueError(
                "needs join: an observer joins a running cluster through --join HOST:PORT"
                " (the gRPC address of any of its nodes)"
            )
        return value

    @field_validator("secret")
    @classmethod
    def _secret_long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) < MIN_SECRET_BYTES:
            raise ValueError(
                f"is {len(value.encode())} bytes; a cluster secret needs at least "
                f"{MIN_SECRET_BYTES} (make one with: python3 -c "
                "'import secrets; print(secrets.token_urlsafe(32))')"
            )
        return value

    @field_validator("env_passthrough")
    @classmethod
    def _passthrough_names(cls, value: list[str]) -> list[str]:
        from cortex.executors.environment import check_passthrough

        problems = check_passthrough(value, {}, ())
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("peers")
    @classmethod
    def _peer_addresses(cls, value: list[str]) -> list[str]:
        return [check_address(peer) for peer in value]

    @field_validator("tls_cert", "tls_key", "tls_ca", mode="before")
    @classmethod
    def _unset_if_empty(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("tls_key")
    @classmethod
    def _key_with_cert(cls, value: str | None, info: ValidationInfo) -> str | None:
        if "tls_cert" not in info.data:
            return value  # tls_cert itself was invalid and is reported
        if info.data["tls_cert"] and not value:
            raise ValueError("missing: tls_cert is set, and TLS needs its private key too")
        if value and not info.data["tls_cert"]:
            raise ValueError("tls_cert is missing: TLS needs the certificate that goes with it")
        return value

    @field_validator("tls_client_auth")
    @classmethod
    def _client_auth_needs_tls(cls, value: bool, info: ValidationInfo) -> bool:
        if value and not info.data.get("tls_cert"):
            raise ValueError("needs tls_cert and tls_key: client certificates require TLS")
        if value and not info.data.get("tls_ca"):
            raise ValueError("needs tls_ca, the CA that signs the client certificates")
        return value

    @field_validator("election_timeout_max_s")
    @classmethod
    def _election_timeout_spread(cls, value: float, info: ValidationInfo) -> float:
        least = info.data.get("election_timeout_min_s")
        if least is None:
            return value  # election_timeout_min_s itself was invalid and is reported
        if value < least + ELECTION_TIMEOUT_SPREAD_S:
            raise ValueError(
                f"{value:g} s is too close to election_timeout_min_s ({least:g} s): the longest"
                f" election timeout must exceed the shortest by {ELECTION_TIMEOUT_SPREAD_S:g} s"
                " at least, so the voters do not all stand for election at once"
            )
        return value

    @field_validator("labels", "capabilities")
    @classmethod
    def _pair_keys(cls, value: dict[str, str]) -> dict[str, str]:
        # Constraints name them as `key` or `key=value`.
        for key in value:
            if not key.strip() or "=" in key:
                raise ValueError(f"{key!r} is not a key: not empty, and without '='")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"{value!r} is not a log level: one of {', '.join(LOG_LEVELS)}")
        return level

    @field_validator("node_id")
    @classmethod
    def _node_id_chars(cls, value: str) -> str:
        if not all(ch.isalnum() or ch in "-_." for ch in value):
            raise ValueError("may contain only letters, digits, '-', '_' and '.'")
        return value

    @field_validator("executors")
    @classmethod
    def _known_executors(cls, value: list[str] | None) -> list[str] | None:
        from cortex.executors import executor_types

        known = executor_types()
        for name in value or ():
            if name not in known:
                raise ValueError(f"unknown executor {name!r} (installed: {', '.join(known)})")
        return value

    @field_validator("container_mounts")
    @classmethod
    def _absolute_mounts(cls, value: list[str]) -> list[str]:
        for path in value:
            if not os.path.isabs(path) or "\x00" in path:
                raise ValueError(f"{path!r} is not an absolute path")
        return [os.path.normpath(path) for path in value]

    @field_validator("subagent_command", mode="before")
    @classmethod
    def _command_words(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return shlex.split(value)
            except ValueError as err:
                raise ValueError(f"cannot split {value!r} into words: {err}") from None
        return value

    @property
    def clustered(self) -> bool:
        return bool(self.peers or self.join)

    @property
    def raft_address(self) -> str:
        """This node's Raft address as the other nodes know it."""
        return _advertised(self.raft, self.advertise)

    @property
    def grpc_address(self) -> str:
        """The gRPC address other nodes and clients use for this node."""
        return _advertised(self.grpc, self.advertise)

    @property
    def peer_listen(self) -> str:
        """Where the peer listener binds: `peer`, or any free port on the gRPC host."""
        return self.peer or f"{self.grpc.rpartition(':')[0]}:0"

    def peer_address(self, port: int) -> str:
        """The peer address other nodes use, once the listener has its `port`."""
        return f"{self.advertise or self.peer_listen.rpartition(':')[0]}:{port}"

    @property
    def waiting_tasks(self) -> int:
        """The tasks this node takes to wait for a slot (`prefetch_tasks`)."""
        return self.max_tasks // 2 if self.prefetch_tasks is None else self.prefetch_tasks

    @property
    def heartbeat_window_s(self) -> float:
        """How far a heartbeat's send time may be from the receiver's clock."""
        return self.max_clock_skew_s + self.heartbeat_interval_s


def _advertised(listen: str, host: str | None) -> str:
    return f"{host}:{listen.rpartition(':')[2]}" if host else listen


_LIST_KEYS = {"peers", "executors", "gaming_processes", "env_passthrough", "container_mounts"}
_MAP_KEYS = {"labels", "capabilities", "k8s"}
# Tables of tables: JSON in the environment.
_JSON_KEYS = {"executor_options"}


def _from_env(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Reads `CORTEX_<KEY>` for every config key; returns values and their sources."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in NodeConfig.model_fields:
        name = f"CORTEX_{key.upper()}"
        if name not in environ:
            continue
        raw = environ[name]
        if key in _LIST_KEYS:
            values[key] = [item.strip() for item in raw.split(",") if item.strip()]
        elif key in _MAP_KEYS:
            pairs = [item.split("=", 1) for item in raw.split(",") if item.strip()]
            if any(len(pair) != 2 for pair in pairs):
                raise ConfigError(f"config key {key} (from {name}): expected k=v,k=v")
            values[key] = {k.strip(): v.strip() for k, v in pairs}
        elif key in _JSON_KEYS:
            try:
                values[key] = json.loads(raw)
            except ValueError as err:
                raise ConfigError(f"config key {key} (from {name}): not JSON: {err}") from None
        else:
            values[key] = raw
        sources[key] = f"environment variable {name}"
    return values, sources


def _read_secret_files(merged: dict[str, Any], sources: dict[str, str]) -> None:
    """Replaces `secret_file` / `api_token_file` by what the files hold.
    A value and a file for the same secret are refused, whichever layers
    they came from: which one was meant cannot be guessed."""
    for key, file_key in SECRET_FILE_KEYS.items():
        path = merged.get(file_key)
        if path is None:
            continue
        if merged.get(key) is not None:
            raise ConfigError(
                f"config key {file_key} (from {sources[file_key]}): {key} is set too "
                f"(from {sources[key]}); give the value or the file, not both"
            )
        if not isinstance(path, str) or not path.strip():
            raise ConfigError(f"config key {file_key} (from {sources[file_key]}): not a path")
        merged[key] = read_secret_file(path, f"config key {file_key} (from {sources[file_key]})")
        sources[key] = f"file {path} ({sources[file_key]})"


def _check_passthrough_values(config: NodeConfig, environ: Mapping[str, str]) -> None:
    """A name in env_passthrough whose variable holds the secret or a token
    here would hand it to every task: refused."""
    from cortex.executors.environment import check_passthrough, secret_values

    problems = check_passthrough(
        config.env_passthrough, environ, secret_values(environ, config.secret, config.api_token)
    )
    if problems:
        raise ConfigError(f"config key env_passthrough: {'; '.join(problems)}")


def load_config(
    path: str | None = None,
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> NodeConfig:
    """File < environment < flags. Raises ConfigError naming the bad key."""
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if path:
        # Imported here: every CLI command imports this module, and only a
        # node reading its config file needs a YAML parser.
        import yaml

        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as err:
            raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
        except yaml.YAMLError as err:
            raise ConfigError(f"config file {path} is not valid YAML: {err}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping of keys to values")
        merged.update({str(k).replace("-", "_"): v for k, v in loaded.items()})
        sources.update({key: f"config file {path}" for key in merged})
    environ = os.environ if environ is None else environ
    env_values, env_sources = _from_env(environ)
    merged.update(env_values)
    sources.update(env_sources)
    for key, value in (flags or {}).items():
        if value is not None:
            merged[key] = value
            sources[key] = f"flag --{key.replace('_', '-')}"
    _read_secret_files(merged, sources)
    try:
        config = NodeConfig.model_validate(merged)
    except ValidationError as err:
        problems = []
        for problem in err.errors():
            key = ".".join(str(part) for part in problem["loc"]) or "config"
            origin = sources.get(str(problem["loc"][0]) if problem["loc"] else "")
            message = problem["msg"].removeprefix("Value error, ")
            if problem["type"] == "extra_forbidden":
                message = "unknown config key"
            where = f" (from {origin})" if origin else ""
            problems.append(f"config key {key}{where}: {message}")
        raise ConfigError("; ".join(problems)) from None
    _check_passthrough_values(config, environ)
    return config
