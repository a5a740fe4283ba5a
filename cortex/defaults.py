"""The ports and address a node takes when given none, and reading a secret
kept in a file: what the command line needs from the configuration without
its models (`cortex.config`), whose import costs a command a third of its
start."""

from __future__ import annotations

from pathlib import Path

from cortex.errors import ConfigError

DEFAULT_RAFT_PORT = 7100
DEFAULT_GRPC_PORT = 7200
DEFAULT_GRPC_ADDRESS = f"127.0.0.1:{DEFAULT_GRPC_PORT}"
DEFAULT_HTTP_PORT = 7300


def read_secret_file(path: str, what: str) -> str:
    """A secret kept in a file: its content without surrounding whitespace.
    Raises ConfigError naming `what` when it cannot be read or is empty."""
    try:
        value = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as err:
        raise ConfigError(f"{what}: cannot read {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what}: {path} is not UTF-8 text") from None
    if not value:
        raise ConfigError(f"{what}: {path} is empty")
    return value
