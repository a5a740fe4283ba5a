"""The node's HTTP listener and the Prometheus metrics it serves at
`/metrics`."""

from cortex.http.metrics import NodeMetrics
from cortex.http.server import METRICS_PATH, HttpListener, server_tls_context

__all__ = ["METRICS_PATH", "HttpListener", "NodeMetrics", "server_tls_context"]
