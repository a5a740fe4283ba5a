"""The executor settings of a node's configuration (file, `CORTEX_*`
variables, flags) and the command-line flags that set a task's executor
options."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex.api.convert import struct_dict
from cortex.cli.parser import build_parser
from cortex.cli.tasks import named_by_flag, task_spec
from cortex.config import load_config
from cortex.errors import ConfigError, InvalidArgument
from cortex.executors import TaskEnvironment
from cortex.node import _executor_settings


def test_the_executor_keys_come_from_file_environment_and_flags(tmp_path: Path) -> None:
    config_file = tmp_path / "node.yaml"
    config_file.write_text(
        "executors: [shell, container]\n"
        "container_runtime: podman\n"
        "container_mounts: [/srv/shared/]\n"
        "subagent_command: claude -p --output-format text\n"
        "k8s: {kubeconfig: /etc/kube.conf, namespace: jobs}\n"
        "executor_options: {http: {timeout_s: 5}}\n"
        "env_passthrough: [APP_*]\n"
    )
    config = load_config(str(config_file), environ={})
    assert config.executors == ["shell", "container"]
    assert config.container_mounts == ["/srv/shared"]
    assert config.subagent_command == ["claude", "-p", "--output-format", "text"]
    settings = _executor_settings(config, "a-secret-of-16-bytes", tmp_path / "data")
    assert settings.data_dir == str(tmp_path / "data")
    assert settings.container_runtime == "podman"
    assert settings.container_mounts == ("/srv/shared",)
    assert settings.subagent_command == ("claude", "-p", "--output-format", "text")
    assert settings.k8s == {"kubeconfig": "/etc/kube.conf", "namespace": "jobs"}
    assert settings.options_for("http") == {"timeout_s": 5} and settings.options_for("x") == {}
    assert isinstance(settings.environment, TaskEnvironment)
    assert settings.environment.passthrough == ("APP_*",)
    assert "a-secret-of-16-bytes" in settings.environment.secret_values

    environ = {
        "CORTEX_EXECUTORS": "shell,noop",
        "CORTEX_CONTAINER_MOUNTS": "/a,/b",
        "CORTEX_SUBAGENT_COMMAND": "agent --quiet",
        "CORTEX_K8S": "context=prod,namespace=batch",
        "CORTEX_EXECUTOR_OPTIONS": '{"http": {"timeout_s": 2}}',
    }
    from_env = load_config(str(config_file), environ=environ)
    assert from_env.executors == ["shell", "noop"]
    assert from_env.container_mounts == ["/a", "/b"]
    assert from_env.subagent_command == ["agent", "--quiet"]
    assert from_env.k8s == {"context": "prod", "namespace": "batch"}
    assert from_env.executor_options == {"http": {"timeout_s": 2}}
    flags = {"container_runtime": "docker", "subagent_command": "other-agent"}
    from_flags = load_config(str(config_file), flags, environ=environ)
    assert from_flags.container_runtime == "docker"
    assert from_flags.subagent_command == ["other-agent"]
    # No setting at all: every installed executor, nothing configured for them.
    bare = load_config(None, environ={})
    assert bare.executors is None and bare.subagent_command == [] and bare.k8s == {}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"executors": ["shell", "docker"]},
         "config key executors (from flag --executors): unknown executor 'docker' (installed: "),
        ({"container_runtime": "lxc"}, "config key container_runtime"),
        ({"container_mounts": ["data"]}, "'data' is not an absolute path"),
        ({"subagent_command": 'agent "unclosed'}, "cannot split"),
        ({"executor_options": {"http": 5}}, "config key executor_options.http"),
    ],
)  # fmt: skip
def test_bad_executor_settings_name_the_key(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, flags, environ={})
    assert message in str(info.value), info.value


def test_a_bad_executor_options_variable_is_named() -> None:
    with pytest.raises(ConfigError, match="config key executor_options .*not JSON"):
        load_config(None, environ={"CORTEX_EXECUTOR_OPTIONS": "{http"})


def test_node_start_takes_the_executor_flags() -> None:
    args = build_parser().parse_args(
        ["node", "start", "--executors", "shell,subagent", "--container-runtime", "docker",
         "--container-mount", "/srv/a", "--container-mount", "/srv/b",
         "--subagent-command", "claude -p"]
    )  # fmt: skip
    assert args.executors == "shell,subagent" and args.container_runtime == "docker"
    assert args.container_mount == ["/srv/a", "/srv/b"]
    assert args.subagent_command == "claude -p"


def submitted(*argv: str) -> dict[str, object]:
    args = build_parser().parse_args(["task", "submit", *argv])
    spec = task_spec(args)
    return {"type": spec.type, "command": list(spec.command), **struct_dict(spec.options)}


def test_task_submit_flags_become_executor_options() -> None:
    assert submitted(
        "--type", "container", "--image", "alpine:3", "--memory-mb", "256", "--cpus", "0.5",
        "--", "echo", "hi",
    ) == {"type": "container", "command": ["echo", "hi"], "image": "alpine:3",
          "memoryMb": 256, "cpus": 0.5}  # fmt: skip
    assert submitted("--type", "subagent", "--prompt", "Send a failure notification") == {
        "type": "subagent",
        "command": [],
        "prompt": "Send a failure notification",
    }
    assert submitted(
        "--type", "http", "--option", "url=http://x/y?a=b", "--option", "expectStatus=204",
        "--option", 'headers={"X-A": "1"}',
    ) == {"type": "http", "command": [], "url": "http://x/y?a=b", "expectStatus": 204,
          "headers": {"X-A": "1"}}  # fmt: skip


def test_an_option_flag_of_another_type_is_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"--image is an option of container tasks"):
        submitted("--image", "alpine", "--", "true")
    with pytest.raises(InvalidArgument, match=r"--prompt is an option of subagent tasks"):
        submitted("--type", "container", "--image", "x", "--prompt", "hi")


def test_a_refused_option_names_its_flag() -> None:
    assert named_by_flag("spec.options.memoryMb: Input should be greater than 0") == (
        "--memory-mb: Input should be greater than 0"
    )
    assert named_by_flag("spec.options.url: Field required") == "spec.options.url: Field required"
