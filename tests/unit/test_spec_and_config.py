"""Task spec validation and node configuration loading: errors name the field
or config key at fault (and, for config, where the value came from)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cortex.config import NodeConfig, load_config
from cortex.errors import ConfigError, InvalidArgument
from cortex.spec import RetryPolicy, TaskSpec, parse_task_spec, stored_task_spec
from cortex.state.spec_rules import check_task_spec

# ---------------------------------------------------------------- task specs


def spec_error(data: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(InvalidArgument) as caught:
        parse_task_spec(data, **kwargs)
    return str(caught.value)


def test_valid_specs_parse_with_defaults() -> None:
    argv = parse_task_spec({"command": ["echo", "hi"]})
    assert isinstance(argv, TaskSpec)
    assert (argv.type, argv.command, argv.priority, argv.timeout_ms) == (
        "shell",
        ["echo", "hi"],
        5,
        None,
    )
    assert argv.retry_policy == RetryPolicy(maxRetries=3, backoffMs=1000, backoffMultiplier=2.0)
    assert argv.retry_policy.retryable is True

    full = parse_task_spec(
        {
            "command": "echo $HOME",
            "timeoutMs": 1500,
            "env": {"A": "1"},
            "priority": 9,
            "constraints": {"requiresGpu": True, "nodeLabels": ["fast"]},
            "retryPolicy": {"maxRetries": 0, "retryable": False},
        }
    )
    assert full.command == "echo $HOME"
    assert full.timeout_ms == 1500
    assert full.constraints.requires_gpu is True and full.constraints.node_labels == ["fast"]
    assert (full.retry_policy.max_retries, full.retry_policy.retryable) == (0, False)
    assert parse_task_spec({"type": "noop"}).command is None


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"command": ""}, "spec.command", "empty"),
        ({"command": "   "}, "spec.command", "empty"),
        ({"command": []}, "spec.command", "empty"),
        ({"command": ["", "x"]}, "spec.command", "empty"),
        ({"command": ["x"], "type": "Docker"}, "spec.type", "lowercase"),
        ({"command": ["x"], "timeoutMs": -1}, "spec.timeoutMs", "greater than 0"),
        ({"command": ["x"], "timeoutMs": 0}, "spec.timeoutMs", "greater than 0"),
        ({"command": ["x"], "bogus": 1}, "spec.bogus", "not permitted"),
        ({"command": ["x"], "constraints": {"gpu": True}}, "spec.constraints.gpu", "not permitted"),
        ({"command": ["x"], "priority": 11}, "spec.priority", "10"),
        ({"command": ["x"], "retryPolicy": {"maxRetries": -1}}, "spec.retryPolicy.maxRetries", "0"),
        ({"command": ["x"], "env": {"A=B": "1"}}, "spec.env", "A=B"),
        ({"command": 42}, "spec.command", ""),
    ],
)
def test_spec_errors_name_the_field(data: dict[str, Any], field: str, words: str) -> None:
    message = spec_error(data)
    assert message.startswith(f"{field}:") or f"; {field}:" in message or f"{field}." in message, (
        message
    )
    assert words in message


def test_shell_spec_without_command_is_an_error() -> None:
    message = spec_error({"type": "shell"})
    assert "command" in message


def test_spec_over_the_size_limit_is_rejected_before_validation() -> None:
    data = {"command": ["echo", "x" * 5000], "bogus": 1}
    message = spec_error(data, max_bytes=1024)
    assert "1024" in message and "limit" in message
    assert "bogus" not in message
    assert parse_task_spec({"command": ["echo", "x" * 500]}, max_bytes=1024).command


def test_default_size_limit_is_one_mebibyte() -> None:
    message = spec_error({"command": ["echo", "x" * (1024 * 1024 + 1)]})
    assert str(1024 * 1024) in message


def test_several_problems_are_all_reported() -> None:
    message = spec_error({"command": "", "priority": -1, "extra": True})
    for field in ("spec.command", "spec.priority", "spec.extra"):
        assert field in message


@pytest.mark.parametrize(
    ("policy", "delays"),
    [
        ({}, [1000, 2000, 4000]),
        ({"backoffMs": 500, "backoffMultiplier": 3}, [500, 1500, 4500]),
        ({"backoffMs": 250, "backoffMultiplier": 1}, [250, 250, 250]),
        ({"backoffMs": 0}, [0, 0, 0]),
    ],
)
def test_retry_delay_grows_by_the_multiplier(policy: dict[str, Any], delays: list[int]) -> None:
    retry = RetryPolicy.model_validate(policy)
    assert [retry.delay_ms(n) for n in (1, 2, 3)] == delays


def test_retry_policy_accepts_field_names_and_aliases() -> None:
    assert RetryPolicy(max_retries=2) == RetryPolicy.model_validate({"maxRetries": 2})


def test_a_stored_spec_is_checked_by_every_rule_but_the_plain_json_walk() -> None:
    stored = check_task_spec({"type": "shell", "command": "true", "env": {"A": "1"}})
    assert stored_task_spec(stored) == TaskSpec.model_validate(stored)
    with pytest.raises(ValidationError, match="priority"):
        stored_task_spec({**stored, "priority": 11})
    with pytest.raises(ValidationError, match="command"):
        stored_task_spec({**stored, "command": None})
    # Apply stores plain JSON only; a spec from anywhere else is walked.
    not_plain = {**stored, "options": {"x": math.nan}}
    with pytest.raises(ValidationError, match="options.x must be a finite number"):
        TaskSpec.model_validate(not_plain)
    assert math.isnan(stored_task_spec(not_plain).options["x"])


# ---------------------------------------------------------------- config


def write(tmp_path: Path, text: str, name: str = "node.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def config_error(**kwargs: Any) -> str:
    kwargs.setdefault("environ", {})
    with pytest.raises(ConfigError) as caught:
        load_config(**kwargs)
    return str(caught.value)


def test_no_config_gives_a_local_single_node() -> None:
    config = load_config(environ={})
    assert isinstance(config, NodeConfig)
    assert config.raft.startswith("127.0.0.1:") and config.grpc.startswith("127.0.0.1:")
    assert config.data_dir == "./cortex-data"
    assert config.clustered is False
    assert config.secret is None


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "node_id: from-file\nmax_tasks: 10\nraft: 127.0.0.1:7001\nlabels: {zone: a}\n",
    )
    env = {"CORTEX_MAX_TASKS": "20", "CORTEX_RAFT": "127.0.0.1:7002"}

    only_file = load_config(path, environ={})
    assert (only_file.node_id, only_file.max_tasks, only_file.raft) == (
        "from-file",
        10,
        "127.0.0.1:7001",
    )
    assert only_file.labels == {"zone": "a"}

    with_env = load_config(path, environ=env)
    assert (with_env.node_id, with_env.max_tasks, with_env.raft) == (
        "from-file",
        20,
        "127.0.0.1:7002",
    )

    with_flags = load_config(path, flags={"max_tasks": 30, "raft": None}, environ=env)
    assert with_flags.max_tasks == 30
    assert with_flags.raft == "127.0.0.1:7002"  # a flag left unset does not override
    assert with_flags.node_id == "from-file"
    assert with_flags.labels == {"zone": "a"}


def test_environment_lists_and_maps(tmp_path: Path) -> None:
    config = load_config(
        environ={
            "CORTEX_PEERS": "127.0.0.1:7101, 127.0.0.1:7102",
            "CORTEX_LABELS": "zone=b, gpu = yes",
            "CORTEX_EXECUTORS": "shell",
            "UNRELATED": "ignored",
        }
    )
    assert config.peers == ["127.0.0.1:7101", "127.0.0.1:7102"]
    assert config.labels == {"zone": "b", "gpu": "yes"}
    assert config.executors == ["shell"]
    assert config.clustered is True


def test_file_keys_may_use_dashes(tmp_path: Path) -> None:
    path = write(tmp_path, "max-tasks: 7\nscheduler-interval-s: 0.5\n")
    config = load_config(path, environ={})
    assert (config.max_tasks, config.scheduler_interval_s) == (7, 0.5)


def test_bad_yaml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "raft: 127.0.0.1:7100\npeers: [unclosed\n")
    message = config_error(path=path)
    assert path in message and "YAML" in message


def test_yaml_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- a\n- b\n")
    message = config_error(path=path)
    assert path in message and "mapping" in message


def test_missing_file_is_named(tmp_path: Path) -> None:
    path = str(tmp_path / "absent.yaml")
    assert path in config_error(path=path)


def test_unknown_key_is_named_with_its_source(tmp_path: Path) -> None:
    path = write(tmp_path, "node_id: a\nmax_taks: 3\n")
    message = config_error(path=path)
    assert "max_taks" in message and f"config file {path}" in message
    assert "unknown" in message


@pytest.mark.parametrize("value", ["nohost", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", ":80"])
def test_bad_address_from_a_flag(value: str) -> None:
    message = config_error(flags={"raft": value})
    assert "config key raft" in message and "flag --raft" in message
    assert value in message


def test_bad_peer_address_from_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "peers: ['127.0.0.1:7101', 'bad-peer']\n")
    message = config_error(path=path)
    assert "peers" in message and "bad-peer" in message and path in message


def test_wrong_type_from_an_environment_variable() -> None:
    message = config_error(environ={"CORTEX_MAX_TASKS": "lots"})
    assert "max_tasks" in message and "CORTEX_MAX_TASKS" in message
    assert "integer" in message


def test_out_of_range_value_from_an_environment_variable() -> None:
    message = config_error(environ={"CORTEX_MAX_TASKS": "0"})
    assert "max_tasks" in message and "CORTEX_MAX_TASKS" in message


def test_malformed_labels_from_an_environment_variable() -> None:
    message = config_error(environ={"CORTEX_LABELS": "zone"})
    assert "labels" in message and "CORTEX_LABELS" in message


def test_unknown_executor_and_bad_node_id() -> None:
    message = config_error(flags={"executors": ["shell", "docker"], "node_id": "bad id!"})
    assert "executors" in message and "docker" in message
    assert "node_id" in message


def test_error_names_the_layer_that_supplied_the_value(tmp_path: Path) -> None:
    path = write(tmp_path, "grpc: 127.0.0.1:7200\n")
    message = config_error(path=path, environ={"CORTEX_GRPC": "not-an-address"})
    assert "grpc" in message and "CORTEX_GRPC" in message and path not in message


def test_task_retention_defaults_to_a_week_and_zero_turns_purging_off(tmp_path: Path) -> None:
    from cortex.cli.main import build_parser
    from cortex.raft.proposer import MAX_BATCH_TASKS
    from cortex.state.purge import MAX_PURGE_LIMIT

    default = load_config(environ={})
    assert default.task_retention_s == 7 * 24 * 3600
    assert (default.purge_batch_size, default.purge_interval_s) == (128, 30.0)
    # A default purge is no larger than a batch the proposer cuts.
    assert default.purge_batch_size <= MAX_BATCH_TASKS
    path = write(tmp_path, "task_retention_s: 3600\n")
    assert load_config(path, environ={}).task_retention_s == 3600
    env = {"CORTEX_TASK_RETENTION_S": "0", "CORTEX_PURGE_INTERVAL_S": "0.5"}
    from_env = load_config(path, environ=env)
    assert (from_env.task_retention_s, from_env.purge_interval_s) == (0, 0.5)
    args = build_parser().parse_args(["node", "start", "--task-retention", "60"])
    assert load_config(path, {"task_retention_s": args.task_retention}, env).task_retention_s == 60
    assert "task_retention_s" in config_error(flags={"task_retention_s": -1})
    # A batch the config accepts is one apply accepts.
    assert load_config(environ={}, flags={"purge_batch_size": MAX_PURGE_LIMIT})
    assert "purge_batch_size" in config_error(flags={"purge_batch_size": MAX_PURGE_LIMIT + 1})


def test_listening_on_every_interface_needs_an_advertised_host() -> None:
    message = config_error(flags={"raft": "0.0.0.0:7100"})
    assert "config key advertise" in message and "0.0.0.0" in message and "--advertise" in message
    message = config_error(flags={"grpc": "[::]:7200"})
    assert "config key advertise" in message and "grpc listens on [::]" in message


@pytest.mark.parametrize("value", ["", "0.0.0.0", "host:7100", "fe80::1", "a b"])
def test_a_bad_advertised_host_is_named(value: str) -> None:
    message = config_error(flags={"advertise": value})
    assert "config key advertise" in message and "flag --advertise" in message


def test_advertised_addresses_keep_the_listening_ports() -> None:
    config = load_config(
        flags={"raft": "0.0.0.0:7101", "grpc": "0.0.0.0:7201", "advertise": "10.0.0.5"},
        environ={},
    )
    assert (config.raft, config.raft_address) == ("0.0.0.0:7101", "10.0.0.5:7101")
    assert (config.grpc, config.grpc_address) == ("0.0.0.0:7201", "10.0.0.5:7201")
    ipv6 = load_config(flags={"advertise": "[fd00::5]"}, environ={})
    assert ipv6.raft_address == "[fd00::5]:7100"
    plain = load_config(environ={})
    assert (plain.raft_address, plain.grpc_address) == (plain.raft, plain.grpc)


def test_the_peer_listener_defaults_to_a_free_port_on_the_grpc_host() -> None:
    from cortex.cli.main import build_parser

    plain = load_config(environ={})
    assert plain.peer is None and plain.peer_listen == "127.0.0.1:0"
    assert plain.peer_address(41234) == "127.0.0.1:41234"
    wide = load_config(
        flags={"raft": "0.0.0.0:7101", "grpc": "0.0.0.0:7201", "advertise": "10.0.0.5"},
        environ={},
    )
    assert (wide.peer_listen, wide.peer_address(41234)) == ("0.0.0.0:0", "10.0.0.5:41234")
    fixed = load_config(
        flags={"peer": "0.0.0.0:7301", "advertise": "10.0.0.5"},
        environ={"CORTEX_MAX_INFLIGHT_REQUESTS": "100", "CORTEX_MAX_WAITS": "8"},
    )
    assert (fixed.peer_listen, fixed.peer_address(7301)) == ("0.0.0.0:7301", "10.0.0.5:7301")
    assert (fixed.max_inflight_requests, fixed.max_waits) == (100, 8)
    args = build_parser().parse_args(["node", "start", "--peer", "127.0.0.1:7300"])
    assert args.peer == "127.0.0.1:7300"


def test_peer_listener_problems_are_named() -> None:
    for value in ("7300", "host:", "host:70000"):
        message = config_error(flags={"peer": value})
        assert "config key peer (from flag --peer)" in message and "HOST:PORT" in message
    message = config_error(flags={"peer": "0.0.0.0:7300"})
    assert "config key advertise" in message and "peer listens on 0.0.0.0" in message
    assert "max_inflight_requests" in config_error(flags={"max_inflight_requests": 0})
    assert "max_clock_skew_s" in config_error(flags={"max_clock_skew_s": 0})
    defaults = load_config(environ={})
    assert (defaults.max_inflight_requests, defaults.max_streams, defaults.max_waits) == (
        56,
        32,
        16,
    )
    assert defaults.heartbeat_window_s == defaults.max_clock_skew_s + defaults.heartbeat_interval_s


def test_election_timeout_defaults_layers_and_bounds(tmp_path: Path) -> None:
    from cortex.cli.main import build_parser

    default = load_config(environ={})
    assert (default.election_timeout_min_s, default.election_timeout_max_s) == (0.4, 1.4)
    path = write(tmp_path, "election_timeout_min_s: 2\nelection_timeout_max_s: 4\n")
    from_file = load_config(path, environ={})
    assert (from_file.election_timeout_min_s, from_file.election_timeout_max_s) == (2, 4)
    env = {"CORTEX_ELECTION_TIMEOUT_MAX_S": "6"}
    assert load_config(path, environ=env).election_timeout_max_s == 6
    args = build_parser().parse_args(
        ["node", "start", "--election-timeout-min", "1", "--election-timeout-max", "1.5"]
    )
    flags = {
        "election_timeout_min_s": args.election_timeout_min,
        "election_timeout_max_s": args.election_timeout_max,
    }
    from_flags = load_config(path, flags, env)
    assert (from_flags.election_timeout_min_s, from_flags.election_timeout_max_s) == (1, 1.5)
    # Below the default's floor, named with where it came from.
    message = config_error(environ={"CORTEX_ELECTION_TIMEOUT_MIN_S": "0.1"})
    assert "election_timeout_min_s" in message and "CORTEX_ELECTION_TIMEOUT_MIN_S" in message
    assert "0.4" in message
    # The longest too close to the shortest: both keys named; so is a
    # longest given alone that comes too close to the default shortest.
    message = config_error(flags={"election_timeout_min_s": 2, "election_timeout_max_s": 2.1})
    assert "election_timeout_max_s" in message and "election_timeout_min_s" in message
    assert "0.2" in message
    assert "election_timeout_max_s" in config_error(flags={"election_timeout_max_s": 0.5})
    # An invalid shortest is reported once, not again as the longest's problem.
    message = config_error(flags={"election_timeout_min_s": 0})
    assert "election_timeout_min_s" in message and "election_timeout_max_s" not in message


def test_a_log_level_is_one_logging_knows() -> None:
    assert load_config(environ={"CORTEX_LOG_LEVEL": "debug"}).log_level == "DEBUG"
    message = config_error(flags={"log_level": "chatty"})
    assert "log_level" in message and "chatty" in message and "WARNING" in message


def test_every_config_key_is_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    missing = [key for key in NodeConfig.model_fields if f"`{key}`" not in readme]
    assert not missing, f"config keys the README does not describe: {missing}"


def test_label_and_capability_keys_are_named_when_empty_or_holding_an_equals_sign(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, 'labels: {"": x}\n')
    message = config_error(path=path)
    assert "labels" in message and path in message and "not a key" in message
    message = config_error(path=write(tmp_path, 'capabilities: {"cuda=12": "yes"}\n'))
    assert "capabilities" in message and "cuda=12" in message
    # A value may hold one: only the first splits a pair.
    assert load_config(environ={"CORTEX_CAPABILITIES": "a=b=c"}).capabilities == {"a": "b=c"}
