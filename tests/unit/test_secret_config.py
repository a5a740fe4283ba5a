"""Secrets in configuration: read from files (never both a file and a value),
a minimum length, the lone node's generated secret written private from its
creation, env_passthrough refusing credentials, and the client's token file."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.api.auth import default_token
from cortex.config import NodeConfig, load_config
from cortex.data_dir import resolve_secret, write_private_file
from cortex.errors import ConfigError

SECRET = "a-cluster-secret-of-some-length"


def config_error(**kwargs: Any) -> str:
    kwargs.setdefault("environ", {})
    with pytest.raises(ConfigError) as caught:
        load_config(**kwargs)
    return str(caught.value)


def secret_file(tmp_path: Path, content: str, name: str = "secret") -> str:
    path = tmp_path / name
    path.write_text(content)
    return str(path)


# ---------------------------------------------------------------- files


def test_secret_and_token_are_read_from_files_stripped(tmp_path: Path) -> None:
    config = load_config(
        flags={"secret_file": secret_file(tmp_path, f"  {SECRET}\n")},
        environ={"CORTEX_API_TOKEN_FILE": secret_file(tmp_path, "token-1234\n", "token")},
    )
    assert config.secret == SECRET
    assert config.api_token == "token-1234"


def test_secret_file_from_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(f"secret_file: {secret_file(tmp_path, SECRET)}\n")
    assert load_config(str(path), environ={}).secret == SECRET


@pytest.mark.parametrize(
    ("value_layer", "file_layer"),
    [("environ", "flags"), ("flags", "environ"), ("flags", "flags")],
)
def test_a_file_and_a_value_for_the_same_secret_are_refused(
    tmp_path: Path, value_layer: str, file_layer: str
) -> None:
    path = secret_file(tmp_path, SECRET)
    layers: dict[str, dict[str, str]] = {"environ": {}, "flags": {}}
    layers[value_layer]["CORTEX_SECRET" if value_layer == "environ" else "secret"] = SECRET
    layers[file_layer]["CORTEX_SECRET_FILE" if file_layer == "environ" else "secret_file"] = path
    message = config_error(environ=layers["environ"], flags=layers["flags"])
    assert message.startswith("config key secret_file")
    assert "not both" in message


def test_an_empty_or_missing_file_is_refused_by_name(tmp_path: Path) -> None:
    empty = secret_file(tmp_path, " \n")
    message = config_error(flags={"secret_file": empty})
    assert "config key secret_file (from flag --secret-file)" in message and "empty" in message
    missing = str(tmp_path / "absent")
    message = config_error(environ={"CORTEX_API_TOKEN_FILE": missing})
    assert "config key api_token_file (from environment variable CORTEX_API_TOKEN_FILE)" in message
    assert missing in message


def test_a_short_secret_is_refused_naming_the_key(tmp_path: Path) -> None:
    message = config_error(flags={"secret": "fifteen-bytes!!"})
    assert message.startswith("config key secret (from flag --secret): is 15 bytes")
    assert "at least 16" in message
    from_file = config_error(flags={"secret_file": secret_file(tmp_path, "short")})
    assert from_file.startswith("config key secret (from file ")
    assert "--secret-file" in from_file and "at least 16" in from_file
    assert load_config(flags={"secret": "sixteen-bytes!!!"}, environ={}).secret


def test_the_client_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORTEX_API_TOKEN", raising=False)
    monkeypatch.setenv("CORTEX_API_TOKEN_FILE", secret_file(tmp_path, "client-token\n"))
    assert default_token() == "client-token"
    monkeypatch.setenv("CORTEX_API_TOKEN", "other")
    with pytest.raises(ConfigError, match="both set"):
        default_token()
    monkeypatch.delenv("CORTEX_API_TOKEN")
    monkeypatch.setenv("CORTEX_API_TOKEN_FILE", secret_file(tmp_path, "", "empty"))
    with pytest.raises(ConfigError, match="CORTEX_API_TOKEN_FILE: .* is empty"):
        default_token()


# ---------------------------------------------------------------- env_passthrough


def test_env_passthrough_takes_names_and_patterns() -> None:
    config = load_config(
        environ={"CORTEX_ENV_PASSTHROUGH": "AWS_*, HTTP_PROXY", "HTTP_PROXY": "http://proxy"}
    )
    assert config.env_passthrough == ["AWS_*", "HTTP_PROXY"]


@pytest.mark.parametrize("name", ["CORTEX_SECRET", "CORTEX_API_TOKEN", "CORTEX_MCP_TOKEN"])
def test_env_passthrough_refuses_credential_variables(name: str) -> None:
    message = config_error(flags={"env_passthrough": ["PATH", name]})
    assert message.startswith("config key env_passthrough (from flag --env-passthrough)")
    assert f"{name} holds a credential" in message


@pytest.mark.parametrize(
    ("environ", "flags"),
    [
        ({"COPY": SECRET}, {"secret": SECRET}),
        ({"COPY": "api-token-value"}, {"api_token": "api-token-value"}),
        ({"COPY": "mcp-token-value", "CORTEX_MCP_TOKEN": "mcp-token-value"}, {}),
        ({"COPY": "client-token", "CORTEX_API_TOKEN": "client-token"}, {"api_token": "node-tok"}),
    ],
)
def test_env_passthrough_refuses_a_name_holding_a_secret(
    environ: dict[str, str], flags: dict[str, Any]
) -> None:
    message = config_error(environ=environ, flags={**flags, "env_passthrough": ["COPY"]})
    assert message == (
        "config key env_passthrough: COPY holds the cluster secret or an API token "
        "and is never passed to tasks"
    )


# ---------------------------------------------------------------- the lone node's secret


@pytest.fixture
def open_umask() -> Iterator[None]:
    """With no umask, only the mode the code asks for protects the file."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_generated_secret_is_private_from_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_umask: None
) -> None:
    """Created with mode 0600 by the open itself: with every later change of
    mode made impossible, the file still ends up 0600 (under umask 0), so
    there was no moment with a wider one."""
    created: list[int] = []
    real_open = os.open

    def watching_open(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        fd = real_open(path, flags, mode, **kwargs)
        if flags & os.O_CREAT:
            created.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return fd

    def no_chmod(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the mode must be right from creation, not fixed afterwards")

    monkeypatch.setattr(os, "open", watching_open)
    monkeypatch.setattr(os, "chmod", no_chmod)
    monkeypatch.setattr(os, "fchmod", no_chmod)
    value = resolve_secret(NodeConfig(), tmp_path)
    path = tmp_path / "secret"
    assert created == [0o600]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(value.encode()) >= 16 and path.read_text() == value
    assert list(tmp_path.iterdir()) == [path]  # no temporary left behind
    assert resolve_secret(NodeConfig(), tmp_path) == value  # kept across restarts


def test_write_private_file_replaces_a_stale_temporary(tmp_path: Path, open_umask: None) -> None:
    stale = tmp_path / ".secret.tmp"
    stale.write_text("half-written")
    stale.chmod(0o644)
    write_private_file(tmp_path / "secret", "new-content")
    assert (tmp_path / "secret").read_text() == "new-content"
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600
    assert not stale.exists()


def test_a_kept_secret_that_is_too_short_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("\n")
    with pytest.raises(ConfigError, match="shorter than 16 bytes; remove the file"):
        resolve_secret(NodeConfig(), tmp_path)


def test_a_cluster_member_must_be_given_the_secret(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config key secret: .*--secret-file"):
        resolve_secret(NodeConfig(peers=["127.0.0.1:7101"]), tmp_path)
    assert not (tmp_path / "secret").exists()
