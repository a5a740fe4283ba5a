"""The node-local agent that runs assigned attempts and reports them."""

from cortex.agent.launcher import ExecutionLauncher, ThreadLauncher
from cortex.agent.runner import Agent

__all__ = ["Agent", "ExecutionLauncher", "ThreadLauncher"]
