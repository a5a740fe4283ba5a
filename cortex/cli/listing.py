"""Paged listings (`task list`, `workflow list`, `dlq list`) in every output
format, one page at a time or, with `--all`, every page streamed as it
arrives with one page in memory at a time:

- table / wide: one header; each page's rows line up under the first
  page's columns; a count line at the end.
- json: one page is an object (`{"tasks": [...], "total": N,
  "next_page_token": ...}`); with `--all`, one JSON array of every item,
  written item by item (still one valid JSON document: `jq '.[]'`).
- yaml: the same shapes as YAML (with `--all`, one sequence).
- name: one full id per line.

Without `--all`, a listing that has another page names the command for it
on stderr: `next: cortex task list ... --page-token TOKEN`."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from rich.text import Text

from cortex.cli import render
from cortex.cli.tables import Column, fit_widths, natural_widths, print_table, stretch, widen_kept
from cortex.defaults import DEFAULT_GRPC_ADDRESS
from cortex.errors import InvalidArgument
from cortex.requests import DEFAULT_PAGE_SIZE
from cortex.v1 import cortex_pb2 as pb

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_page_token: str
    total: int


@dataclass(frozen=True)
class Listing(Generic[T]):
    """How to fetch, name and show the items of one listing."""

    # What the items are, in the count line ("tasks").
    what: str
    # Their key in a JSON page ("tasks").
    key: str
    # The page a token starts ("" the first).
    fetch: Callable[[str], Page[T]]
    item_id: Callable[[T], str]
    item_json: Callable[[T], dict[str, Any]]
    # The table's columns, wide or not.
    columns: Callable[[bool], list[Column]]
    # One item's cells: wide or not, and the short id of each id on its page.
    row: Callable[[T, bool, dict[str, str]], list[Text]]
    # The command that lists the next page, without its --page-token.
    command: list[str]
    # Called once the first page is in (e.g. to read later pages more cheaply).
    after_first_page: Callable[[], None] | None = None


def run_listing(listing: Listing[T], args: argparse.Namespace) -> int:
    fmt = render.output_format(args)
    try:
        if getattr(args, "all_pages", False):
            _all_pages(listing, fmt, args.page_token)
            return 0
        page = listing.fetch(args.page_token)
        _one_page(listing, page, fmt)
        sys.stdout.flush()
        if page.next_page_token:
            words = [*listing.command, "--page-token", page.next_page_token]
            print(f"next: {shlex.join(words)}", file=sys.stderr)
    except BrokenPipeError:
        # The reader went away (`cortex task list --all | head`): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0


def _rows(listing: Listing[T], items: list[T], wide: bool) -> list[list[Text]]:
    ids = [listing.item_id(item) for item in items]
    shorts = {i: i for i in ids} if wide else render.short_ids(ids)
    return [listing.row(item, wide, shorts) for item in items]


def _one_page(listing: Listing[T], page: Page[T], fmt: str) -> None:
    if fmt in ("json", "yaml"):
        data = {
            listing.key: [listing.item_json(item) for item in page.items],
            "total": page.total,
            "next_page_token": page.next_page_token or None,
        }
        render.print_data(data, fmt)
        return
    if fmt == "name":
        for item in page.items:
            print(listing.item_id(item))
        return
    if page.items:
        wide = fmt == "wide"
        columns = listing.columns(wide)
        rows = _rows(listing, page.items, wide)
        widths = natural_widths(columns, rows) if wide else None
        print_table(render.console, columns, rows, widths)
    render.console.print(render.page_note(len(page.items), page.total, listing.what))


def _all_pages(listing: Listing[T], fmt: str, token: str) -> None:
    wide = fmt == "wide"
    columns = listing.columns(wide)
    widths: list[int] | None = None
    count = 0
    if fmt == "json":
        sys.stdout.write("[")
    while True:
        page = listing.fetch(token)
        if count == 0 and listing.after_first_page is not None:
            listing.after_first_page()
        for item in page.items:
            if fmt == "json":
                # Indented by two more: no line of the text is empty, and a
                # newline inside one of its strings is written escaped.
                text = json.dumps(listing.item_json(item), indent=2).replace("\n", "\n  ")
                sys.stdout.write(("\n  " if count == 0 else ",\n  ") + text)
            elif fmt == "yaml":
                sys.stdout.write(render.yaml_text([listing.item_json(item)]))
            elif fmt == "name":
                sys.stdout.write(listing.item_id(item) + "\n")
            count += 1
        if fmt in ("table", "wide") and page.items:
            rows = _rows(listing, page.items, wide)
            if widths is None:
                if wide:
                    widths = natural_widths(columns, rows)
                else:
                    # Later pages get the room this one leaves.
                    width = render.console.width
                    widths = stretch(columns, fit_widths(columns, rows, width), width)
                print_table(render.console, columns, rows, widths)
            else:
                widths = widen_kept(columns, widths, rows)
                print_table(render.console, columns, rows, widths, header=False)
        sys.stdout.flush()
        token = page.next_page_token
        if not token:
            break
    if fmt == "json":
        sys.stdout.write("\n]\n" if count else "]\n")
    elif fmt == "yaml" and not count:
        sys.stdout.write("[]\n")
    elif fmt in ("table", "wide"):
        render.console.print(f"[dim]{render.counted(count, listing.what)}[/]")
    sys.stdout.flush()


# -- the request's part the flags decide, and the command that repeats it -----------


def created_range(args: argparse.Namespace) -> pb.TimeRange | None:
    """The creation window `--since`/`--until` ask for, in whole
    milliseconds (what the next page's command repeats exactly)."""
    since_ms, until_ms = _window_ms(args)
    if since_ms is None and until_ms is None:
        return None
    if since_ms is not None and until_ms is not None and until_ms <= since_ms:
        raise InvalidArgument(
            f"--until ({_iso(until_ms)}) is not after --since ({_iso(since_ms)}): nothing"
            " was submitted in between"
        )
    span = pb.TimeRange()
    if since_ms is not None:
        span.start_time.FromMilliseconds(since_ms)
    if until_ms is not None:
        span.end_time.FromMilliseconds(until_ms)
    return span


def order(args: argparse.Namespace) -> int:
    """The ListOrder `--sort` asks for (newest first by default)."""
    if getattr(args, "sort", "newest") == "oldest":
        return pb.LIST_ORDER_OLDEST_FIRST
    return pb.LIST_ORDER_NEWEST_FIRST


def _window_ms(args: argparse.Namespace) -> tuple[int | None, int | None]:
    since, until = getattr(args, "since", None), getattr(args, "until", None)
    return (
        None if since is None else round(since * 1000),
        None if until is None else round(until * 1000),
    )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def next_command(args: argparse.Namespace, words: list[str], filters: list[str]) -> list[str]:
    """`cortex WORDS FILTERS` with the flags of this listing that the next
    page must repeat (a page token holds to the filters and order it was
    issued for); relative times become the absolute ones they meant."""
    command = ["cortex"]
    default_node = os.environ.get("CORTEX_NODE", "").strip() or DEFAULT_GRPC_ADDRESS
    if getattr(args, "node", None) and args.node != default_node:
        command += ["--node", args.node]
    if getattr(args, "consistency", None):
        command += ["--consistency", args.consistency]
    command += [*words, *filters]
    fmt = render.output_format(args)
    if fmt != "table":
        command += ["-o", fmt]
    if getattr(args, "sort", "newest") == "oldest":
        command += ["--sort", "oldest"]
    since_ms, until_ms = _window_ms(args)
    if since_ms is not None:
        command += ["--since", _iso(since_ms)]
    if until_ms is not None:
        command += ["--until", _iso(until_ms)]
    limit = getattr(args, "limit", DEFAULT_PAGE_SIZE)
    if limit != DEFAULT_PAGE_SIZE:
        command += ["--limit", str(limit)]
    return command
