"""The package's layers, read from its source. Every import counts, the
ones inside functions included:

- the domain packages never import the interfaces (`cortex.api`, `cortex.http`,
  `cortex.cli`, `cortex.mcp`) or the node's wiring (`cortex.node`,
  `cortex.__main__`): they define the interfaces they need (membership's
  `PeerCalls`, the output relay's `RelayCalls`) and the outer layer
  implements them, so a simulated cluster can stand in for it;
- `cortex.state`, the deterministic core, imports only itself,
  `cortex.failstop` and the standard library (no pydantic, no gRPC, no
  other Cortex package);
- no module reaches itself again through its imports (imports made only
  for type checking never run, so they do not count here)."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import cortex

PACKAGE_ROOT = Path(cortex.__file__).parent
DOMAIN_PACKAGES = (
    "cortex.state",
    "cortex.scheduler",
    "cortex.membership",
    "cortex.workflows",
    "cortex.agent",
    "cortex.executors",
    "cortex.output",
    "cortex.raft",
)
OUTER_LAYER = (
    "cortex.api",
    "cortex.cli",
    "cortex.http",
    "cortex.mcp",
    "cortex.node",
    "cortex.__main__",
)
# Besides itself: how a node stops, and how ids are made (both import only the
# standard library).
STATE_MAY_IMPORT = ("cortex.state", "cortex.failstop", "cortex.ids")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # what it imports, as an absolute module name
    line: int
    type_checking: bool  # inside `if TYPE_CHECKING:`


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                inside.update(id(n) for n in ast.walk(statement))
    return inside


def imports_in(source: str, module: str, is_package: bool, modules: set[str]) -> list[Import]:
    """Every import statement of `source` (the module `module`), wherever it
    stands. `from package import name` imports the submodule when `name` is
    one of `modules`, the package otherwise."""
    tree = ast.parse(source)
    checking = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                targets.append(submodule if submodule in modules else origin)
        found.extend(
            Import(module, target, node.lineno, id(node) in checking) for target in targets
        )
    return found


def _package_imports() -> list[Import]:
    paths = sorted(PACKAGE_ROOT.rglob("*.py"))
    modules = {_module_name(path) for path in paths}
    found = []
    for path in paths:
        name = _module_name(path)
        found.extend(imports_in(path.read_text(), name, path.name == "__init__.py", modules))
    return found


ALL_IMPORTS = _package_imports()


def _describe(imports: list[Import]) -> list[str]:
    return [f"{i.module} (line {i.line}) imports {i.target}" for i in imports]


def test_the_walker_sees_function_local_relative_and_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import board\n"
        "from .. import errors\n"
        "if TYPE_CHECKING:\n"
        "    from cortex.api.client import CortexClient\n"
        "def later():\n"
        "    from cortex.api.convert import resources_to_proto\n"
        "    import cortex.cli.main\n"
    )
    modules = {"cortex.membership.board", "cortex.errors", "cortex.api.convert"}
    found = imports_in(source, "cortex.membership.heartbeat", False, modules)
    assert [(i.target, i.type_checking) for i in found] == [
        ("typing", False),
        ("cortex.membership.board", False),
        ("cortex.errors", False),
        ("cortex.api.client", True),
        ("cortex.api.convert", False),
        ("cortex.cli.main", False),
    ]
    # The walk covers the whole package, and finds what the wiring imports.
    assert {"cortex.state.machine", "cortex.node"} <= {i.module for i in ALL_IMPORTS}
    assert any(
        i.module == "cortex.node" and _within(i.target, ("cortex.api",)) for i in ALL_IMPORTS
    )


def test_domain_packages_do_not_import_the_interfaces_or_the_wiring() -> None:
    offending = [
        i
        for i in ALL_IMPORTS
        if _within(i.module, DOMAIN_PACKAGES) and _within(i.target, OUTER_LAYER)
    ]
    assert _describe(offending) == []


def test_state_imports_only_itself_failstop_and_the_standard_library() -> None:
    offending = [
        i
        for i in ALL_IMPORTS
        if _within(i.module, ("cortex.state",))
        and not _within(i.target, STATE_MAY_IMPORT)
        and i.target.split(".")[0] not in sys.stdlib_module_names
    ]
    assert _describe(offending) == []


def test_no_module_imports_itself_back() -> None:
    graph: dict[str, set[str]] = {}
    for i in ALL_IMPORTS:
        if not i.type_checking and i.target.startswith("cortex") and i.target != i.module:
            graph.setdefault(i.module, set()).add(i.target)
    cycles = []
    state: dict[str, str] = {}  # "open" while on the current path, then "done"
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == []
