"""The environment a task inherits from its node: an allow-list of ordinary
variables (PATH, HOME, locale ...) plus the names the operator lets through,
never the node's secrets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

# What a command expects to find; everything else of the node's stays behind.
DEFAULT_PASSTHROUGH = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "TERM",
)
# Variables that carry a node's or a client's credentials: never passed, not
# even when a pattern in `env_passthrough` matches them.
SECRET_VARIABLES = frozenset({"CORTEX_SECRET", "CORTEX_API_TOKEN", "CORTEX_MCP_TOKEN"})
_PATTERN_CHARS = frozenset("*?[")


def is_pattern(entry: str) -> bool:
    return any(ch in _PATTERN_CHARS for ch in entry)


def check_passthrough(
    entries: Iterable[str], environ: Mapping[str, str], secret_values: Iterable[str]
) -> list[str]:
    """Problems with an `env_passthrough` list: names of secret variables, or
    of variables that hold a configured secret or token right now."""
    secrets = {value for value in secret_values if value}
    problems = []
    for entry in entries:
        if not entry or "=" in entry or "\x00" in entry:
            problems.append(f"{entry!r} is not a variable name or a pattern such as AWS_*")
        elif entry in SECRET_VARIABLES:
            problems.append(f"{entry} holds a credential and is never passed to tasks")
        elif not is_pattern(entry) and environ.get(entry) in secrets:
            problems.append(
                f"{entry} holds the cluster secret or an API token and is never passed to tasks"
            )
    return problems


@dataclass(frozen=True)
class TaskEnvironment:
    """Which of the node's variables a task sees. `secret_values` are the
    node's secret and tokens: a variable holding one of them is dropped
    whatever its name."""

    passthrough: tuple[str, ...] = ()
    secret_values: frozenset[str] = frozenset()

    def allows(self, name: str) -> bool:
        if name in SECRET_VARIABLES:
            return False
        return any(fnmatchcase(name, p) for p in (*DEFAULT_PASSTHROUGH, *self.passthrough))

    def inherited(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The part of `environ` a task inherits."""
        return {
            name: value
            for name, value in environ.items()
            if self.allows(name) and value not in self.secret_values
        }


def secret_values(environ: Mapping[str, str], *configured: str | None) -> frozenset[str]:
    """The configured secret and tokens, and whatever the secret variables
    hold in `environ` (a client token may differ from the node's own)."""
    values = {environ.get(name) for name in SECRET_VARIABLES} | set(configured)
    return frozenset(value for value in values if value)
