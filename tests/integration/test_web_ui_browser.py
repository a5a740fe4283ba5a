"""The web UI in a real browser (headless Chromium, `--dump-dom`: the page
loaded, its script run against a real 3-node cluster, the DOM it built
read back): the tasks page shows the rows its URL's filters select, with
task data as text, never as markup; the workflow page draws the DAG as SVG,
one node per task in its state's colour class, conditions on the edges; with
an API token, the page asks for it."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.cluster import Cluster, ClusterNode, shared_cluster, shell_spec, wait_until
from tests.metrics_scrape import request

BROWSER = next(
    (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None
)
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        BROWSER is None,
        reason="no Chromium to load the pages in (Debian: apt-get install -y chromium)",
    ),
]

TOKEN = "web-ui-token-4321"
HOSTILE = '<img src=x onerror="document.title=1">'
WORKFLOW = """
name: ui-dag
tasks:
  fetch:
    type: shell
    spec: {command: "echo fetched"}
  build:
    type: shell
    dependsOn: [fetch]
    spec: {command: "echo built"}
  ship:
    type: shell
    dependsOn: [build]
    condition: "parent.build.exitCode === 0"
    spec: {command: "echo shipped"}
  rollback:
    type: shell
    dependsOn: [build]
    condition: "parent.build.exitCode !== 0"
    spec: {command: "echo rolled back"}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "webui")


class Element:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class Dom(HTMLParser):
    """Every element of a page, each with the text inside it."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.elements.append(element)
        if tag not in {"meta", "link", "input", "br", "img", "path", "rect", "option"}:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text += data

    def find(self, tag: str, has: Callable[[Element], bool] = lambda _: True) -> list[Element]:
        return [e for e in self.elements if e.tag == tag and has(e)]


def rendered(url: str, profile: Path, ready: Callable[[Dom], bool]) -> Dom:
    """The DOM once the page's script has built it (loaded again until
    `ready` says it holds what the test waits for)."""
    assert BROWSER is not None
    dom = Dom("")
    for _ in range(5):
        shown = subprocess.run(
            [
                BROWSER,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=5000",
                "--dump-dom",
                url,
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.returncode == 0, shown.stderr[-2000:]
        dom = Dom(shown.stdout)
        if ready(dom):
            return dom
        time.sleep(1)
    raise AssertionError(f"{url} never showed what was waited for:\n{shown.stdout[-3000:]}")


def api(node: ClusterNode, path: str) -> dict[str, Any] | None:
    answer = request(f"http://{node.http}/api/v1/{path}")
    return json.loads(answer.body) if answer.status == 200 else None


def test_the_tasks_page_shows_the_rows_its_url_filters(cluster: Cluster, tmp_path: Path) -> None:
    labels = {"suite": "ui", "owner": HOSTILE}
    with cluster.nodes[0].client() as client:
        ids = [
            client.submit_task(shell_spec(f"echo ui-{n} '{HOSTILE}'", labels=labels)).task.id
            for n in range(3)
        ]
        client.submit_task(shell_spec("echo unlabelled"))
    viewer = cluster.nodes[1]

    def completed() -> bool:
        listing = api(viewer, "tasks?label=suite%3Dui&state=completed")
        return listing is not None and listing["total"] == 3

    wait_until(completed, 60, what="the labelled tasks to complete on the viewing node")
    url = f"http://{viewer.http}/#/tasks?state=completed&label={quote('suite=ui', safe='')}"

    def rows(dom: Dom) -> list[Element]:
        return dom.find("tr", lambda e: "data-task-id" in e.attrs)

    dom = rendered(url, tmp_path / "profile", lambda dom: len(rows(dom)) == 3)
    # Newest first, every row the filter selects and no other.
    assert [row.attrs["data-task-id"] for row in rows(dom)] == ids[::-1]
    for row in rows(dom):
        assert "completed" in row.text and HOSTILE in row.text
    # The filters are the URL's, shown in the form.
    selected = dom.find("option", lambda e: "selected" in e.attrs)
    assert [option.attrs["value"] for option in selected] == ["completed"]
    (label,) = dom.find("input", lambda e: e.attrs.get("name") == "label")
    assert label.attrs["value"] == "suite=ui"
    (total,) = dom.find("p", lambda e: e.attrs.get("id") == "task-total")
    assert total.text == "3 tasks match"
    # Task data went in as text: the markup it holds made no element.
    assert dom.find("img") == []
    # The node's bare address is the tasks page, unfiltered.
    everything = rendered(
        f"http://{viewer.http}/", tmp_path / "profile", lambda d: len(rows(d)) >= 4
    )
    assert set(ids) <= {row.attrs["data-task-id"] for row in rows(everything)}


def test_the_workflow_page_draws_every_task_in_its_state_colour(
    cluster: Cluster, tmp_path: Path
) -> None:
    with cluster.nodes[2].client() as client:
        workflow_id = client.submit_workflow(WORKFLOW).workflow_id
    viewer = cluster.nodes[0]

    def finished() -> dict[str, Any] | None:
        found = api(viewer, f"workflows/{workflow_id}")
        workflow = found["workflow"] if found else None
        return workflow if workflow and workflow["state"] == "completed" else None

    workflow = wait_until(finished, 60, what="the workflow to complete")
    states = {task["key"]: task["state"] for task in workflow["tasks"]}
    assert states == {
        "fetch": "completed", "build": "completed", "ship": "completed", "rollback": "skipped",
    }  # fmt: skip

    def nodes(dom: Dom) -> list[Element]:
        return dom.find("g", lambda e: "dag-node" in e.classes)

    dom = rendered(
        f"http://{viewer.http}/#/workflows/{workflow_id}",
        tmp_path / "profile",
        lambda dom: len(nodes(dom)) == len(states),
    )
    (svg,) = dom.find("svg", lambda e: e.attrs.get("id") == "dag")
    drawn = {node.attrs["data-key"]: node for node in nodes(dom)}
    assert set(drawn) == set(states)
    for key, state in states.items():
        assert f"state-{state}" in drawn[key].classes, (key, drawn[key].classes)
        assert drawn[key].attrs["data-task-id"] == next(
            t["task_id"] for t in workflow["tasks"] if t["key"] == key
        )
    edges = dom.find("path", lambda e: "dag-edge" in e.classes)
    assert sorted((e.attrs["data-from"], e.attrs["data-to"]) for e in edges) == [
        ("build", "rollback"), ("build", "ship"), ("fetch", "build"),
    ]  # fmt: skip
    # Each condition once, on its task's incoming edge (in full on hover).
    written = {
        e.attrs["data-task-key"]: e.text
        for e in dom.find("text", lambda e: "dag-condition" in e.classes)
    }
    conditions = {t["key"]: t["condition"] for t in workflow["tasks"] if t["condition"]}
    assert set(written) == set(conditions) == {"ship", "rollback"}
    for key, condition in conditions.items():
        assert f"if {condition}" in written[key]
    assert float(svg.attrs["width"]) > 0 and float(svg.attrs["height"]) > 0


def test_with_a_token_the_page_asks_for_it(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    (node,) = make_cluster(1, api_token=TOKEN).nodes

    def login_form(dom: Dom) -> bool:
        return bool(dom.find("input", lambda e: e.attrs.get("name") == "token"))

    dom = rendered(f"http://{node.http}/#/tasks", tmp_path / "profile", login_form)
    (field,) = dom.find("input", lambda e: e.attrs.get("name") == "token")
    assert field.attrs["type"] == "password"
    assert dom.find("table") == []  # nothing of the cluster's shown
