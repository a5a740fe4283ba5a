"""Executors are found through the `cortex.executors` entry points, the
built-in ones included; a plugin is a separate package with an entry point.
A plugin that fails to import, to start or to fingerprint is left out with
its reason, and the node keeps the rest."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cortex.executors import ExecutorSettings, executor_types, load_executors
from cortex.executors.discovery import UNAVAILABLE_PREFIX
from cortex.executors.noop import NoopExecutor
from cortex.executors.shell import ShellExecutor
from tests.executor_plugins import install_http_plugin, make_plugin_package, use_path

BUILT_IN = {"shell", "noop", "container", "subagent", "k8s_job"}

FAULTY = """
import os, threading, time
from pydantic import BaseModel

class Options(BaseModel):
    pass

class Base:
    uses_work_dir = False
    options_model = Options
    def fingerprint(self):
        return {}
    def run(self, execution, cancel):
        raise NotImplementedError
    def recover(self, execution, handle, cancel):
        raise LookupError("no")

class Broken(Base):
    name = "broken_start"
    def __init__(self, settings):
        raise RuntimeError("settings rejected")

class Faulty(Base):
    name = "faulty"
    def __init__(self, settings):
        pass
    def fingerprint(self):
        raise OSError("probe crashed")

class Slow(Base):
    name = "slow"
    def __init__(self, settings):
        pass
    def fingerprint(self):
        time.sleep(30)
        return {}

class Misnamed(Base):
    name = "other"

class Late(Base):
    # Nothing to run with until its runtime is "installed" (its marker file).
    name = "late"
    def __init__(self, settings):
        self.marker = settings.options_for("late")["marker"]
    def fingerprint(self):
        return {"late.runtime": "up"} if os.path.exists(self.marker) else None

class Fine(Base):
    name = "fine"
    def __init__(self, settings):
        self.settings = settings
    def fingerprint(self):
        return {"fine.mode": self.settings.options_for("fine").get("mode", "plain")}
"""


def test_the_built_in_executors_are_entry_points_too() -> None:
    assert BUILT_IN <= set(executor_types())
    found = load_executors(ExecutorSettings(), ["shell", "noop"])
    assert isinstance(found.usable["shell"], ShellExecutor)
    assert isinstance(found.usable["noop"], NoopExecutor)
    assert found.capabilities == {} and found.left_out == {}
    assert set(found.options) == {"shell", "noop"}


def test_a_subagent_without_a_command_is_left_out_but_its_options_are_known() -> None:
    found = load_executors(ExecutorSettings(), ["subagent"])
    assert "subagent" not in found.usable
    assert found.left_out["subagent"].startswith("not available here")
    assert "subagent" in found.options
    assert found.left_out_capabilities() == {
        f"{UNAVAILABLE_PREFIX}subagent": found.left_out["subagent"]
    }
    on_path = load_executors(ExecutorSettings(subagent_command=("sh", "-c", "cat")), ["subagent"])
    assert on_path.capabilities == {"subagent.command": "sh"}
    missing = load_executors(
        ExecutorSettings(subagent_command=("no-such-agent-cli",)), ["subagent"]
    )
    assert "subagent" in missing.left_out


def test_the_example_plugin_is_found_through_its_entry_point(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "http" not in executor_types()
    use_path(monkeypatch, install_http_plugin(tmp_path_factory.mktemp("http-plugin")))
    assert "http" in executor_types()
    found = load_executors(ExecutorSettings())
    assert type(found.usable["http"]).__module__ == "cortex_exec_http"
    assert found.capabilities["http.client"] == "urllib"
    assert BUILT_IN - {"subagent", "k8s_job"} <= set(found.usable) | set(found.left_out)


def test_plugins_that_fail_are_left_out_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    points = {
        "missing_module": "cortex_no_such_module:Thing",
        "broken_start": "faulty_executors:Broken",
        "faulty": "faulty_executors:Faulty",
        "slow": "faulty_executors:Slow",
        "misnamed": "faulty_executors:Misnamed",
        "fine": "faulty_executors:Fine",
        "Bad-Name": "faulty_executors:Fine",
    }
    use_path(monkeypatch, make_plugin_package(tmp_path, "faulty_executors", FAULTY, points))
    started = time.monotonic()
    found = load_executors(
        ExecutorSettings(extra={"fine": {"mode": "fast"}}),
        [*points, "shell"],
        fingerprint_timeout_s=0.5,
    )
    assert time.monotonic() - started < 10
    assert set(found.usable) == {"fine", "shell"}
    assert found.capabilities == {"fine.mode": "fast"}
    why = found.left_out
    assert why["missing_module"].startswith(
        "failed to load cortex_no_such_module:Thing: ModuleNotFoundError"
    )
    assert why["broken_start"] == (
        "failed to start faulty_executors:Broken: RuntimeError: settings rejected"
    )
    assert why["faulty"] == "its fingerprint failed: OSError: probe crashed"
    assert why["slow"] == "its fingerprint did not answer within 0.5s"
    assert "runs tasks of type 'other', not 'misnamed'" in why["misnamed"]
    assert "is not a task type" in why["Bad-Name"]
    # A failed start still teaches the node the type's options schema.
    assert "broken_start" in found.options and "missing_module" not in found.options


def test_a_configured_type_that_is_not_installed_is_named() -> None:
    found = load_executors(ExecutorSettings(), ["shell", "nothing_like_it"])
    assert found.left_out == {"nothing_like_it": "not installed on this node"}


def test_an_executor_whose_fingerprint_found_nothing_is_used_once_it_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "runtime-up"
    points = {"late": "faulty_executors:Late", "faulty": "faulty_executors:Faulty"}
    use_path(monkeypatch, make_plugin_package(tmp_path / "pkg", "faulty_executors", FAULTY, points))
    settings = ExecutorSettings(extra={"late": {"marker": str(marker)}})
    found = load_executors(settings, ["late", "faulty", "noop"], fingerprint_timeout_s=2.0)
    usable = found.usable  # what the agent holds
    assert set(usable) == {"noop"} and set(found.waiting) == {"late", "faulty"}
    assert found.left_out["late"].startswith("not available here")
    assert f"{UNAVAILABLE_PREFIX}late" in found.left_out_capabilities()

    assert found.retry(2.0) == []  # still nothing
    assert "late" not in usable and "late" in found.left_out

    marker.touch()
    assert found.retry(2.0) == ["late"]
    assert type(usable["late"]).__name__ == "Late" and set(usable) == {"noop", "late"}
    assert found.capabilities == {"late.runtime": "up"}
    assert "late" not in found.left_out and "late" not in found.waiting
    assert f"{UNAVAILABLE_PREFIX}late" not in found.left_out_capabilities()
    # One whose fingerprint keeps failing stays left out, and waiting.
    assert found.left_out["faulty"] == "its fingerprint failed: OSError: probe crashed"
    assert set(found.waiting) == {"faulty"}
    assert found.retry(2.0) == []
