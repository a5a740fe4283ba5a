"""Executor plugins installed the way an operator installs one: the example
package `plugins/cortex-exec-http` built and installed with pip into a
directory of its own (a separate package, found only through its entry
point), which a test puts on `sys.path` or a node's PYTHONPATH."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

PLUGIN_SOURCE = Path(__file__).resolve().parent.parent / "plugins" / "cortex-exec-http"


def install_http_plugin(root: Path) -> Path:
    """Installs the example plugin under `root`; returns the directory that
    holds it (the package and its dist-info with the entry point)."""
    source = root / "source"
    target = root / "site"
    # Built from a copy: the build leaves files beside the sources.
    shutil.copytree(
        PLUGIN_SOURCE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-build-isolation", "--no-index", "--target", str(target), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    assert list(target.glob("cortex_exec_http-*.dist-info/entry_points.txt")), list(
        target.iterdir()
    )
    return target


def make_plugin_package(root: Path, module: str, source: str, entry_points: dict[str, str]) -> Path:
    """A package installed by hand under `root`: `module.py` holding `source`
    and a dist-info declaring `entry_points` (name -> "module:Class") in the
    `cortex.executors` group. Returns `root`, for sys.path."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(source)
    info = root / f"{module.replace('_', '-')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[cortex.executors]\n{lines}")
    return root


def use_path(monkeypatch: object, directory: Path) -> None:
    """Puts `directory` first on sys.path for this test (a pytest monkeypatch)."""
    monkeypatch.syspath_prepend(str(directory))  # type: ignore[attr-defined]
    importlib.invalidate_caches()
