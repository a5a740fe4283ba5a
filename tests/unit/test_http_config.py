"""The `http` config key and `--http` flag: the default, where the value may
come from, the wildcard rule every listen address follows, and the flag's
check while parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex.cli.main import main
from cortex.cli.parser import build_parser
from cortex.config import load_config
from cortex.errors import ConfigError


def _error(**flags: str) -> str:
    with pytest.raises(ConfigError) as refused:
        load_config(flags=flags, environ={})
    return str(refused.value)


def test_the_default_and_where_a_value_comes_from(tmp_path: Path) -> None:
    assert load_config(environ={}).http == "127.0.0.1:7300"
    assert load_config(environ={"CORTEX_HTTP": "127.0.0.1:9100"}).http == "127.0.0.1:9100"
    file = tmp_path / "node.yaml"
    file.write_text("http: '[::1]:9101'\n")
    assert load_config(str(file), environ={}).http == "[::1]:9101"
    args = build_parser().parse_args(["node", "start", "--http", "127.0.0.1:9102"])
    assert args.http == "127.0.0.1:9102"
    assert build_parser().parse_args(["node", "start"]).http is None  # the config decides


def test_a_wildcard_address_needs_an_advertised_host() -> None:
    message = _error(http="0.0.0.0:7300")
    assert "config key advertise" in message and "http listens on 0.0.0.0" in message
    wide = load_config(flags={"http": "0.0.0.0:7300", "advertise": "10.0.0.5"}, environ={})
    assert wide.http == "0.0.0.0:7300"


@pytest.mark.parametrize("value", ["7300", "host:", "host:70000", "host:0"])
def test_a_bad_address_names_the_key(value: str) -> None:
    message = _error(http=value)
    assert "config key http (from flag --http)" in message and "HOST:PORT" in message


@pytest.mark.parametrize(
    "value", ["127.0.0.1:0", "127.0.0.1:65536", "localhost", "::1:7300", "a b:7300", ":7300"]
)
def test_the_flag_refuses_a_bad_value_in_one_line(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["node", "start", f"--http={value}"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.count("\n") == 1 and "argument --http" in err, err


@pytest.mark.parametrize("value", ["127.0.0.1:7300", "[::1]:7300", "node-a.lan:1", "0.0.0.0:80"])
def test_the_flag_takes_host_and_port(value: str) -> None:
    assert build_parser().parse_args(["node", "start", "--http", value]).http == value
