"""The node's HTTP listener: the Prometheus metrics it serves at `/metrics`,
and the web UI with its JSON API (`/`, `/api/v1/`)."""

from cortex.http.metrics import NodeMetrics
from cortex.http.server import METRICS_PATH, HttpListener, server_tls_context
from cortex.http.web_api import API_PREFIX, WebApi

__all__ = [
    "API_PREFIX",
    "METRICS_PATH",
    "HttpListener",
    "NodeMetrics",
    "WebApi",
    "server_tls_context",
]
