"""Workflow definition loading cost: CPU seconds per MB of YAML (with libyaml's
C parser and with the pure-Python one) and of JSON, for the shapes that cost
most per byte, and the CPU a definition at the configured limit takes. The
YAML limits in cortex/workflows/definition.py come from these figures.

    python scripts/bench_yaml.py [--kib 256]
"""

from __future__ import annotations

import argparse
import json
import resource
from collections.abc import Callable

from cortex.workflows import definition
from cortex.workflows.definition import (
    MAX_DEFINITION_BYTES,
    MAX_YAML_BYTES_LIBYAML,
    MAX_YAML_BYTES_PURE,
    load_document,
)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _grow(line: Callable[[int], str], head: str, size: int, tail: str = "") -> str:
    parts, total, i = [head], len(head), 0
    while total < size - len(tail):
        part = line(i)
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts) + tail


def shapes(size: int) -> dict[str, str]:
    """YAML documents of about `size` bytes."""
    return {
        "tasks (block style)": _grow(
            lambda i: f"  t{i}:\n    type: noop\n    dependsOn: [t{max(i - 1, 0)}]\n",
            "name: w\ntasks:\n", size,
        ),
        "flow list of numbers": _grow(lambda i: "1,", "name: w\ntasks: {}\ncontext: {x: [", size, "1]}\n"),
        "many short keys": _grow(lambda i: f"  k{i}: {i}\n", "name: w\ntasks: {}\ncontext:\n", size),
        "nested flow maps": _grow(
            lambda i: f"  k{i}: {{a: {i}, b: x{i}, c: [1, 2]}}\n", "name: w\ntasks: {}\ncontext:\n", size
        ),
        "long strings": _grow(lambda i: f"  k{i}: '{'y' * 2000}'\n", "name: w\ntasks: {}\ncontext:\n", size),
    }  # fmt: skip


def measure(text: str, fmt: str) -> float:
    started = _cpu()
    load_document(text, fmt, max_yaml_bytes=MAX_DEFINITION_BYTES)
    return _cpu() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kib", type=int, default=256, help="size of each document")
    args = parser.parse_args()
    size = args.kib * 1024
    loaders = {"libyaml": definition.YAML_LOADER, "pure": definition._PureYamlLoader}
    if not issubclass(definition.YAML_LOADER, getattr(definition.yaml, "CSafeLoader", ())):
        del loaders["libyaml"]
        print("libyaml is not installed: only the pure-Python loader is measured")
    worst = dict.fromkeys(loaders, 0.0)
    print(f"{'shape':24} {'loader':8} {'KiB':>6} {'CPU s':>7} {'s/MB':>6}")
    for name, text in shapes(size).items():
        data = load_document(text, "yaml", max_yaml_bytes=MAX_DEFINITION_BYTES)
        for loader_name, loader in loaders.items():
            definition.YAML_LOADER = loader
            seconds = measure(text, "yaml")
            rate = seconds / (len(text) / 1e6)
            worst[loader_name] = max(worst[loader_name], rate)
            print(f"{name:24} {loader_name:8} {len(text) / 1024:6.0f} {seconds:7.3f} {rate:6.2f}")
        as_json = json.dumps(data)
        seconds = measure(as_json, "json")
        print(f"{name:24} {'json':8} {len(as_json) / 1024:6.0f} {seconds:7.3f} "
              f"{seconds / (len(as_json) / 1e6):6.2f}")  # fmt: skip
    definition.YAML_LOADER = loaders.get("libyaml", loaders["pure"])
    big = json.dumps({"name": "w", "tasks": {f"t{i}": {"type": "noop", "dependsOn": [f"t{i - 1}"]}
                                             for i in range(1, 110_000)}})  # fmt: skip
    seconds = measure(big, "json")
    print(
        f"\nJSON of {len(big) / 1e6:.1f} MB (limit {MAX_DEFINITION_BYTES / 1e6:.1f} MB): {seconds:.2f} s CPU"
    )
    limits = {"libyaml": MAX_YAML_BYTES_LIBYAML, "pure": MAX_YAML_BYTES_PURE}
    for loader_name, rate in worst.items():
        limit = limits[loader_name]
        print(f"YAML with {loader_name}: worst {rate:.2f} s/MB, so the {limit // 1024} KiB limit costs"
              f" at most about {rate * limit / 1e6:.2f} s CPU per request")  # fmt: skip


if __name__ == "__main__":
    main()
