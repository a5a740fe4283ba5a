"""Starting an observer: the `observer` key (file, CORTEX_OBSERVER, --observer)
needs `join` and refuses `peers`, each error naming the key; a data dir keeps
the role it first ran with; the join an observer makes claims no Raft address."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex import data_dir
from cortex.config import load_config
from cortex.data_dir import check_role, initial_peers
from cortex.errors import ConfigError
from cortex.membership.joining import JoinClaim

SECRET = "a-cluster-secret-of-some-length"


def config_error(**kwargs: Any) -> str:
    kwargs.setdefault("environ", {})
    with pytest.raises(ConfigError) as caught:
        load_config(**kwargs)
    return str(caught.value)


def test_observer_from_flag_env_and_file(tmp_path: Path) -> None:
    join = {"join": "127.0.0.1:7200", "secret": SECRET}
    assert load_config(flags={**join, "observer": True}, environ={}).observer
    assert load_config(flags=join, environ={"CORTEX_OBSERVER": "true"}).observer
    assert not load_config(flags=join, environ={"CORTEX_OBSERVER": "0"}).observer
    path = tmp_path / "node.yaml"
    path.write_text("observer: true\njoin: 127.0.0.1:7200\n")
    assert load_config(str(path), flags={"secret": SECRET}, environ={}).observer
    assert not load_config(environ={}).observer


def test_observer_with_peers_is_refused_naming_the_key() -> None:
    message = config_error(flags={"observer": True, "peers": ["127.0.0.1:7100"], "secret": SECRET})
    assert message.startswith("config key observer (from flag --observer): ")
    assert "peers" in message and "--join" in message


def test_observer_without_join_is_refused() -> None:
    message = config_error(environ={"CORTEX_OBSERVER": "yes"})
    assert "config key observer (from environment variable CORTEX_OBSERVER)" in message
    assert "needs join" in message


def test_observer_value_must_be_a_boolean() -> None:
    message = config_error(flags={"join": "127.0.0.1:7200"}, environ={"CORTEX_OBSERVER": "maybe"})
    assert "config key observer" in message


def test_a_data_dir_keeps_its_role(tmp_path: Path) -> None:
    observer_dir = tmp_path / "o"
    observer_dir.mkdir()
    check_role(observer_dir, observer=True)
    check_role(observer_dir, observer=True)
    (observer_dir / "state.db").write_bytes(b"")
    with pytest.raises(ConfigError, match="cannot start as a voter") as caught:
        check_role(observer_dir, observer=False)
    assert "with --observer" in str(caught.value)

    voter_dir = tmp_path / "v"
    voter_dir.mkdir()
    check_role(voter_dir, observer=False)
    (voter_dir / "raft.log").write_bytes(b"")
    with pytest.raises(ConfigError, match="cannot start as an observer"):
        check_role(voter_dir, observer=True)


def test_a_data_dir_from_before_observers_is_a_voters(tmp_path: Path) -> None:
    (tmp_path / "state.db").write_bytes(b"")
    with pytest.raises(ConfigError, match="cannot start as an observer"):
        check_role(tmp_path, observer=True)
    check_role(tmp_path, observer=False)
    assert (tmp_path / "role").read_text().strip() == "voter"


def test_an_empty_data_dir_takes_the_role_asked_for(tmp_path: Path) -> None:
    # A first start that stopped before joining left no state behind.
    check_role(tmp_path, observer=True)
    check_role(tmp_path, observer=False)
    assert (tmp_path / "role").read_text().strip() == "voter"


def test_an_observer_joins_without_a_raft_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims: list[JoinClaim] = []
    voters = ["127.0.0.1:7100", "127.0.0.1:7101"]

    def join(address: str, claim: JoinClaim, secret: str, tls: Any) -> list[str]:
        claims.append(claim)
        return voters

    monkeypatch.setattr(data_dir, "_join", join)
    # Its unused `raft` default matches a voter's address on the same machine:
    # that voter must stay among its peers.
    config = load_config(
        flags={"join": "127.0.0.1:7200", "secret": SECRET, "observer": True, "node_id": "o1"},
        environ={},
    )
    assert initial_peers(config, tmp_path, SECRET, None, "127.0.0.1:7300") == voters
    (claim,) = claims
    assert (claim.node_id, claim.raft_address, claim.role) == ("o1", "", "observer")
    assert json.loads((tmp_path / "cluster.json").read_text()) == {"members": voters}
    # A restart takes the saved voters and joins nothing.
    assert initial_peers(config, tmp_path, SECRET, None, "127.0.0.1:7300") == voters
    assert len(claims) == 1
