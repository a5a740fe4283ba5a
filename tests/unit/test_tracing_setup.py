"""Turning tracing on: the `otel_exporter` forms, the config key and its
flag, tracing off by default, and a clear refusal at start (naming the
extra to install) when the OpenTelemetry SDK or exporter is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cortex.cli.main import main
from cortex.cli.parser import build_parser
from cortex.config import load_config
from cortex.errors import ConfigError
from cortex.tracing import NO_TRACING, ExporterSetting, build_tracer, parse_exporter_setting


@pytest.mark.parametrize(
    ("value", "setting"),
    [
        (None, None),
        ("", None),
        ("  ", None),
        ("otlp", ExporterSetting("otlp")),
        ("otlp:http://collector:4318", ExporterSetting("otlp", "http://collector:4318/v1/traces")),
        (
            "otlp:https://c.example/otlp/",
            ExporterSetting("otlp", "https://c.example/otlp/v1/traces"),
        ),
        ("file:/tmp/spans.jsonl", ExporterSetting("file", "/tmp/spans.jsonl")),
        (" file:spans.jsonl ", ExporterSetting("file", "spans.jsonl")),
    ],
)
def test_exporter_forms(value: str | None, setting: ExporterSetting | None) -> None:
    assert parse_exporter_setting(value) == setting


@pytest.mark.parametrize(
    "value",
    ["jaeger", "file:", "file:  ", "otlp:collector:4318", "otlp:ftp://c:21", "otlp:http://"],
)
def test_other_exporters_are_refused_naming_the_forms(value: str) -> None:
    with pytest.raises(ValueError, match="otlp|URL"):
        parse_exporter_setting(value)


def test_the_config_key_comes_from_file_environment_or_flag(tmp_path: Path) -> None:
    assert load_config(environ={}).otel_exporter is None
    config_file = tmp_path / "node.yaml"
    config_file.write_text("otel_exporter: otlp\n")
    assert load_config(str(config_file), environ={}).otel_exporter == "otlp"
    environ = {"CORTEX_OTEL_EXPORTER": "file:/tmp/a.jsonl"}
    assert load_config(str(config_file), environ=environ).otel_exporter == "file:/tmp/a.jsonl"
    flags = {"otel_exporter": "otlp:http://c:4318"}
    assert load_config(str(config_file), flags, environ).otel_exporter == "otlp:http://c:4318"


def test_a_bad_exporter_names_the_key_and_where_it_came_from() -> None:
    with pytest.raises(ConfigError, match="otel_exporter.*--otel-exporter.*file:PATH"):
        load_config(flags={"otel_exporter": "zipkin"}, environ={})


def test_node_start_takes_the_flag() -> None:
    args = build_parser().parse_args(["node", "start", "--otel-exporter", "file:/tmp/s.jsonl"])
    assert args.otel_exporter == "file:/tmp/s.jsonl"
    assert build_parser().parse_args(["node", "start"]).otel_exporter is None


def test_tracing_is_off_unless_configured() -> None:
    assert build_tracer(None, "n1") is NO_TRACING
    assert not NO_TRACING.enabled


def test_a_span_file_is_opened_at_start(tmp_path: Path) -> None:
    tracer = build_tracer(f"file:{tmp_path / 'spans' / 'n1.jsonl'}", "n1")
    try:
        assert tracer.enabled and (tmp_path / "spans" / "n1.jsonl").exists()
    finally:
        tracer.shutdown()
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    with pytest.raises(ConfigError, match="otel_exporter: cannot open"):
        build_tracer(f"file:{blocked / 'n1.jsonl'}", "n1")


def test_an_otlp_exporter_is_built_without_reaching_the_collector() -> None:
    build_tracer("otlp:http://127.0.0.1:9", "n1").shutdown()


@pytest.mark.parametrize(
    ("value", "missing"),
    [
        ("file:spans.jsonl", "opentelemetry.sdk"),
        ("otlp", "opentelemetry.exporter.otlp.proto.http.trace_exporter"),
    ],
)
def test_without_the_sdk_a_node_refuses_to_start_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, missing: str
) -> None:
    monkeypatch.chdir(tmp_path)
    # As if not installed: importing it raises ImportError.
    for name in list(sys.modules):
        if name == missing or name.startswith(f"{missing}.") or name == "cortex.tracing.otel":
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(ConfigError, match=r"otel_exporter.*pip install 'cortex-engine\[otel\]'"):
        build_tracer(value, "n1")


def test_node_start_without_the_sdk_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in list(sys.modules):
        if name.startswith("opentelemetry.sdk") or name == "cortex.tracing.otel":
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    code = main(["node", "start", "--data-dir", str(tmp_path / "data"),
                 "--otel-exporter", f"file:{tmp_path / 'spans.jsonl'}"])  # fmt: skip
    assert code == 1
    error = capsys.readouterr().err
    assert "otel_exporter" in error and "pip install 'cortex-engine[otel]'" in error
    assert not (tmp_path / "spans.jsonl").exists()
