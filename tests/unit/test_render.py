"""The CLI's printing without a cluster: short ids, bounded values, column
fitting, paged listings in every format (with and without --all), the
next-page hint, a deep workflow tree and the node table at 80 columns."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import uuid
from typing import Any

import pytest
import yaml
from rich.cells import cell_len
from rich.text import Text

from cortex.cli import render
from cortex.cli.listing import Listing, Page, created_range, next_command, run_listing
from cortex.cli.nodes import nodes_table
from cortex.cli.options import point_in_time
from cortex.cli.tables import Column, fit_widths, render_table, table_width
from cortex.cli.workflows import workflow_tree
from cortex.errors import InvalidArgument
from cortex.v1 import cortex_pb2 as pb


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render.console, "width", 80)


# -- short ids and bounded values -------------------------------------------------------


def test_short_ids_are_unique_prefixes_of_at_least_eight_characters() -> None:
    ids = [str(uuid.uuid4()) for _ in range(500)]
    ids += ["abcdef12-0000-4000-8000-000000000000", "abcdef12-9999-4000-8000-000000000000"]
    shorts = render.short_ids(ids)
    for full, short in shorts.items():
        assert full.startswith(short) and len(short) >= 8
        assert not short.endswith("-")
        assert [other for other in ids if other.startswith(short)] == [full]
    # Sharing the first 8 characters (and the dash) makes both longer.
    assert shorts["abcdef12-0000-4000-8000-000000000000"] == "abcdef12-0"
    assert render.short_ids(["short", "shorter"]) == {"short": "short", "shorter": "shorter"}


def test_long_values_are_cut_saying_how_much_is_left() -> None:
    labels = ", ".join(f"l{i}" for i in range(100_000))
    shown = render.bounded(f"n1: missing labels {labels}", 100)
    assert len(shown) < 120 and shown.startswith("n1: missing labels l0, l1")
    kept = shown.split(" … ")[0].removeprefix("n1: missing labels ").split(", ")
    assert shown.endswith(f" … {100_000 - len(kept):,} more")
    assert render.bounded("x" * 500, 100) == "x" * 100 + "… 400 more characters"
    assert render.bounded("short") == "short"
    args = [f"arg{i}" for i in range(1000)]
    listed = render.bounded_list(args, 50, "more arguments")
    shown_args = listed.split(" … ")[0].split()
    assert shown_args == args[: len(shown_args)]
    assert listed.endswith(f"… {1000 - len(shown_args):,} more arguments")


def test_output_format_takes_json_as_o_json_and_refuses_a_contradiction() -> None:
    assert render.output_format(argparse.Namespace(json=True, output=None)) == "json"
    assert render.output_format(argparse.Namespace(json=False, output="yaml")) == "yaml"
    assert render.output_format(argparse.Namespace()) == "table"
    with pytest.raises(InvalidArgument, match="--json and -o yaml"):
        render.output_format(argparse.Namespace(json=True, output="yaml"))


def test_yaml_keeps_multi_line_text_readable_and_exact() -> None:
    data = {"stdout": "one\ntwo\n", "plain": "x", "ends": "no newline\nat end"}
    text = render.yaml_text(data)
    assert "stdout: |\n  one\n  two\n" in text
    assert yaml.safe_load(text) == data


# -- column fitting --------------------------------------------------------------------


def _rows(*rows: tuple[str, ...]) -> list[list[Text]]:
    return [[Text(cell) for cell in row] for row in rows]


def test_fitting_shrinks_free_text_and_never_a_kept_column() -> None:
    columns = [Column("id", keep=True), Column("state", keep=True), Column("command", min_width=7)]
    rows = _rows(("0123456789abcdef", "completed", "x" * 200))
    widths = fit_widths(columns, rows, 40)
    assert widths[:2] == [16, 9] and table_width(widths) == 40
    # Narrower than the kept columns: those keep their width, the rest its floor.
    assert fit_widths(columns, rows, 10) == [16, 9, 7]
    lines = render_table(columns, fit_widths(columns, rows, 40), rows).plain.splitlines()
    assert lines[1].startswith("0123456789abcdef  completed  xxx") and lines[1].endswith("…")
    assert all(cell_len(line) <= 40 for line in lines)


def test_right_justified_cells_line_up() -> None:
    columns = [Column("n", keep=True, justify="right"), Column("name")]
    table = render_table(columns, [3, 4], _rows(("7", "a"), ("123", "b")))
    assert table.plain.splitlines() == ["  n  name", "  7  a", "123  b"]


# -- listings ----------------------------------------------------------------------------


def _items(count: int) -> list[dict[str, str]]:
    return [
        {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, str(i))), "name": f"item {i}"}
        for i in range(count)
    ]


def _listing(items: list[dict[str, str]], page_size: int) -> tuple[Listing[Any], list[str]]:
    """A listing over `items` in pages; also the tokens it was asked for."""
    asked: list[str] = []

    def fetch(token: str) -> Page[dict[str, str]]:
        asked.append(token)
        start = int(token or 0)
        end = start + page_size
        return Page(items[start:end], str(end) if end < len(items) else "", len(items))

    listing = Listing(
        what="things",
        key="things",
        fetch=fetch,
        item_id=lambda item: item["id"],
        item_json=lambda item: dict(item),
        columns=lambda wide: [Column("id", keep=True), Column("name", min_width=4)],
        row=lambda item, wide, shorts: [Text(shorts[item["id"]]), Text(item["name"])],
        command=["cortex", "thing", "list"],
    )
    return listing, asked


def _args(**given: Any) -> argparse.Namespace:
    fields = {"output": None, "json": False, "all_pages": False, "page_token": "", "limit": 100}
    return argparse.Namespace(**{**fields, **given})


@pytest.mark.parametrize("fmt", ["json", "yaml", "name", "table", "wide"])
def test_all_streams_every_item_once_in_every_format(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    items = _items(25)
    listing, asked = _listing(items, 10)
    assert run_listing(listing, _args(output=fmt, all_pages=True)) == 0
    out, err = capsys.readouterr()
    ids = [item["id"] for item in items]
    assert asked == ["", "10", "20"] and "next:" not in err
    if fmt == "json":
        # Streamed page by page, the text `json.dumps` gives the whole list.
        assert out == json.dumps(items, indent=2) + "\n"
    elif fmt == "yaml":
        assert yaml.safe_load(out) == items
    elif fmt == "name":
        assert out.split() == ids
    else:
        lines = out.splitlines()
        assert lines[0].split() == ["id", "name"] and lines[-1] == "25 things"
        assert sum(line.startswith("id ") for line in lines) == 1
        shown = [line.split()[0] for line in lines[1:-1]]
        assert all(full.startswith(short) for short, full in zip(shown, ids, strict=True))
        assert (shown == ids) == (fmt == "wide")


def test_an_empty_listing_is_valid_in_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    for fmt, parse in (("json", json.loads), ("yaml", yaml.safe_load)):
        run_listing(_listing([], 10)[0], _args(output=fmt, all_pages=True))
        assert parse(capsys.readouterr().out) == []
    run_listing(_listing([], 10)[0], _args(output="table"))
    assert capsys.readouterr().out == "0 things\n"


def test_one_page_names_the_command_for_the_next_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = _items(25)
    listing, _ = _listing(items, 10)
    run_listing(listing, _args(output="json", page_token="10"))
    out, err = capsys.readouterr()
    assert json.loads(out) == {"things": items[10:20], "total": 25, "next_page_token": "20"}
    assert err == "next: cortex thing list --page-token 20\n"
    run_listing(listing, _args(output="json", page_token="20"))
    out, err = capsys.readouterr()
    assert json.loads(out)["next_page_token"] is None and err == ""


def test_the_next_command_repeats_the_filters_with_absolute_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CORTEX_NODE", raising=False)
    since = point_in_time("10m")
    args = _args(output="wide", sort="oldest", since=since, until=None, limit=5,
                 node="10.0.0.9:7200", consistency=None)  # fmt: skip
    words = next_command(args, ["task", "list"], ["--state", "failed"])
    assert words[:6] == ["cortex", "--node", "10.0.0.9:7200", "task", "list", "--state"]
    assert words[words.index("-o") + 1] == "wide" and "--sort" in words
    # The absolute time given back parses to the same window, to the millisecond.
    again = point_in_time(words[words.index("--since") + 1])
    span, span_again = created_range(args), created_range(_args(since=again, until=None))
    assert span is not None and span == span_again
    assert span.start_time.ToMilliseconds() == round(since * 1000)
    assert shlex.split(shlex.join(words)) == words
    with pytest.raises(InvalidArgument, match="--until .* is not after --since"):
        created_range(_args(since=since, until=since))


# -- a deep workflow tree and the node table --------------------------------------------


def _chain(length: int) -> pb.Workflow:
    workflow = pb.Workflow(id=str(uuid.uuid4()), name="chain", state=pb.WORKFLOW_STATE_RUNNING)
    for i in range(length):
        task = workflow.tasks.add(key=f"t{i}", task_id=str(uuid.uuid4()), type="noop")
        task.state = pb.TASK_STATE_PENDING if i else pb.TASK_STATE_RUNNING
        if i:
            task.depends_on.append(f"t{i - 1}")
    return workflow


def _tree_text(workflow: pb.Workflow, show_all: bool) -> str:
    with render.console.capture() as captured:
        render.console.print(workflow_tree(workflow, show_all), soft_wrap=False)
    return captured.get()


def test_a_deep_chain_says_how_many_tasks_are_hidden() -> None:
    text = _tree_text(_chain(500), show_all=False)
    keys = re.findall(r"── (t\d+) ", text)
    hidden = re.search(r"… ([\d,]+) more tasks below", text)
    assert hidden and "--all shows them" in text.replace("\n", " ")
    assert keys == [f"t{i}" for i in range(len(keys))]
    assert len(keys) + int(hidden.group(1).replace(",", "")) == 500
    assert all(cell_len(line) <= 80 for line in text.splitlines())


def test_all_shows_every_task_of_a_deep_chain_within_the_width() -> None:
    workflow = _chain(500)
    text = _tree_text(workflow, show_all=True)
    assert re.findall(r"── (t\d+) ", text) == [f"t{i}" for i in range(500)]
    assert "more tasks below" not in text
    assert all(cell_len(line) <= 80 for line in text.splitlines())
    shorts = render.short_ids(t.task_id for t in workflow.tasks)
    assert all(short in text for short in shorts.values())


def _node(number: int) -> pb.Node:
    node = pb.Node(id=f"worker-{number}", status=pb.NODE_STATUS_ACTIVE, connected=True,
                   running_tasks=3, max_tasks=64, leader=number == 1)  # fmt: skip
    node.labels.update({"zone": "eu-west-1a", "gpu": ""})
    node.resources.CopyFrom(
        pb.NodeResources(
            cpu_usage_percent=42.0,
            memory_total_mb=65536,
            memory_available_mb=30000,
            disk_total_gb=1000,
            disk_available_gb=400,
        )  # fmt: skip
    )
    return node


@pytest.mark.parametrize("width", [200, 80, 60])
def test_the_node_table_keeps_every_column_within_the_width(width: int) -> None:
    nodes = [_node(i) for i in range(1, 4)]
    lines = nodes_table(nodes, width).plain.splitlines()
    assert lines[0].split() == ["node", "status", "cpu", "memory", "disk", "tasks", "labels"]
    assert all(cell_len(line) <= width for line in lines)
    assert [line.split()[0] for line in lines[1:]] == ["worker-1", "worker-2", "worker-3"]
    assert all("42%" in line and "3/64" in line for line in lines[1:])
