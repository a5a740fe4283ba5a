"""Exception types raised inside Cortex and mapped once, at each edge, to
gRPC status codes, HTTP statuses, MCP tool errors and CLI messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


class CortexError(Exception):
    """Base class for errors a caller can act on."""


def for_error(err: CortexError, table: Mapping[type[CortexError], T], default: T) -> T:
    """What an edge's table gives the error's kind (its nearest class in the
    table), or `default`."""
    return next((table[kind] for kind in type(err).__mro__ if kind in table), default)


class InvalidArgument(CortexError):
    """The request is malformed or violates a limit; nothing was written."""


class NotFound(CortexError):
    """The named task, workflow or node does not exist."""


class UnknownId(NotFound):
    """A lookup found nothing under this id in this node's state, before
    anything was proposed: a node that has not applied the latest entries
    yet may only not know it (`cortex.api.consistency`)."""


class FailedPrecondition(CortexError):
    """The request is valid but the target is in the wrong state for it."""


class AlreadyExists(CortexError):
    """An idempotency key is already taken by a task or workflow submitted with
    a different spec or definition; the message names it. Nothing was written."""


class Unavailable(CortexError):
    """No leader or no quorum: the request could not be committed. Retrying
    with the same idempotency key is safe."""


class Unauthenticated(CortexError):
    """The caller did not prove knowledge of the cluster secret."""


class ConfigError(CortexError):
    """A configuration value is missing or invalid; the message names the key."""


class TlsError(Unavailable):
    """A connection failed in its TLS handshake: a certificate not trusted or
    not naming the host, TLS on one side only, or a client certificate
    missing where one is required. Retrying does not help; the settings must
    change."""


class ResourceExhausted(CortexError):
    """The node is at a limit on requests it serves at once (in flight,
    streams, waits); nothing was done. Retrying after `retry_after_s`, or
    asking another node, is safe."""

    def __init__(self, message: str, retry_after_s: float = 0.0, limit: str = "") -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        # Which limit was reached (requests, streams, waits), when known.
        self.limit = limit
