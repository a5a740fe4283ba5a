"""gRPC servicers and a Python client; no business logic here."""

from cortex.api.client import CortexClient

__all__ = ["CortexClient"]
