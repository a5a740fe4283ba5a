"""OpenTelemetry traces of a node's work (node config `otel_exporter`):
submissions, attempts, workflow runs and condition evaluations, all in the
trace of the client that submitted them. Off unless configured; recording
needs the `otel` extra (`pip install 'cortex-engine[otel]'`)."""

from __future__ import annotations

from cortex.errors import ConfigError
from cortex.tracing.exporter_setting import ExporterSetting, parse_exporter_setting
from cortex.tracing.spans import NO_TRACING, Span, Tracer

INSTALL_HINT = "pip install 'cortex-engine[otel]'"


def build_tracer(value: str | None, node_id: str) -> Tracer:
    """The tracer the config value `otel_exporter` asks for (tracing off
    when unset). Raises ConfigError, naming the extra to install, when
    tracing is asked for and the OpenTelemetry SDK is missing, and when the
    span file cannot be opened: a node fails at start, never later."""
    try:
        setting = parse_exporter_setting(value)
    except ValueError as err:
        raise ConfigError(f"config key otel_exporter: {err}") from None
    if setting is None:
        return NO_TRACING
    try:
        from cortex.tracing.otel import create_tracer

        return create_tracer(setting, node_id)
    except ImportError as err:
        raise ConfigError(
            f"config key otel_exporter: tracing needs the OpenTelemetry SDK and exporter,"
            f" and {err.name or 'a part of them'} is not installed: {INSTALL_HINT}"
        ) from None
    except OSError as err:
        raise ConfigError(
            f"config key otel_exporter: cannot open {setting.target}: {err.strerror or err}"
        ) from None


__all__ = [
    "INSTALL_HINT",
    "NO_TRACING",
    "ExporterSetting",
    "Span",
    "Tracer",
    "build_tracer",
    "parse_exporter_setting",
]
