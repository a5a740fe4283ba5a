"""The node config key `otel_exporter`: where a node sends its spans, read
without OpenTelemetry installed (config validation needs no SDK).

- `otlp`: OTLP over HTTP, to where the standard OTEL_EXPORTER_OTLP_*
  environment variables say (default http://localhost:4318);
- `otlp:URL`: OTLP over HTTP to the collector at URL (such as
  http://collector:4318; `/v1/traces` is added to its path, as for
  OTEL_EXPORTER_OTLP_ENDPOINT);
- `file:PATH`: one JSON object per span, one per line, appended to PATH.

Unset or empty: no tracing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

FORMS = "otlp, otlp:http://HOST:4318 or file:PATH"


@dataclass(frozen=True)
class ExporterSetting:
    kind: Literal["otlp", "file"]
    # otlp: the traces URL (None: from the environment); file: the path.
    target: str | None = None


def parse_exporter_setting(value: str | None) -> ExporterSetting | None:
    """The exporter `value` names, None for no tracing; ValueError naming
    the accepted forms for anything else."""
    text = (value or "").strip()
    if not text:
        return None
    kind, _, target = text.partition(":")
    if kind == "otlp":
        return ExporterSetting("otlp", _traces_url(target) if target else None)
    if kind == "file" and target.strip():
        return ExporterSetting("file", target.strip())
    raise ValueError(f"{value!r} is not an exporter: expected {FORMS}")


def _traces_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL of an OTLP collector")
    return f"{url.rstrip('/')}/v1/traces"
