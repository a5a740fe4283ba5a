"""Membership: this node's registration (heartbeats and failure detection come later)."""

from cortex.membership.registry import NodeRegistration

__all__ = ["NodeRegistration"]
