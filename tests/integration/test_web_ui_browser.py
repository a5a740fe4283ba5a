"""The web UI in a real browser (headless Chromium driven through Selenium
and Debian's chromedriver) against a real 3-node cluster: a running
workflow's DAG follows every task's state live; the task list follows its
URL's filters and cancels what they match after confirming the count (and
asks again when more match by then); a task's output grows on its page
while it runs, and its Cancel button stops its process; nodes are cordoned,
drained and uncordoned from their page; the cluster page shows one leader
and every member's digest; with an API token the page asks for it. Task
data is shown as text, never as markup. Screenshots of the workflow and
nodes pages are taken each run (and kept in docs/screenshots with
CORTEX_UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from tests.cluster import Cluster, ClusterNode, pid_alive, shared_cluster, shell_spec, wait_until
from tests.metrics_scrape import request

try:
    from selenium import webdriver
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # the test extra not installed: skipped below
    webdriver = None  # type: ignore[assignment]

BROWSER = next(
    (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None
)
DRIVER = shutil.which("chromedriver")
MISSING = [
    what
    for what, there in (
        ("Chromium (Debian: apt-get install -y chromium)", BROWSER),
        ("chromedriver (Debian: apt-get install -y chromium-driver)", DRIVER),
        ("selenium (pip install -e '.[test]')", webdriver),
    )
    if there is None
]
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(bool(MISSING), reason="no " + " and no ".join(MISSING)),
]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
TOKEN = "web-ui-token-4321"
HOSTILE = '<img src=x onerror="document.title=1">'
TERMINAL = {"completed", "failed", "cancelled", "skipped", "dead_letter"}
WORKFLOW = """
name: ui-live
tasks:
  fetch:
    type: shell
    spec: {command: "sleep 2; echo fetched"}
  build:
    type: shell
    dependsOn: [fetch]
    spec: {command: "sleep 2; echo built"}
  lint:
    type: shell
    dependsOn: [fetch]
    retryPolicy: {maxRetries: 0}
    spec: {command: "sleep 1; echo 'style broken' >&2; exit 3"}
  ship:
    type: shell
    dependsOn: [build]
    condition: "parent.build.exitCode === 0"
    spec: {command: "sleep 1; echo shipped"}
  rollback:
    type: shell
    dependsOn: [build]
    condition: "parent.build.exitCode !== 0"
    spec: {command: "echo rolled back"}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "webui")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: Any) -> Iterator[WebDriver]:
    assert BROWSER is not None and DRIVER is not None
    options = Options()
    options.binary_location = BROWSER
    for argument in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", "--window-size=1360,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver given, so Selenium never looks for (or downloads) one.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(autouse=True)
def console_on_failure(browser: WebDriver, request: pytest.FixtureRequest) -> Iterator[None]:
    """The browser's console, printed when the test failed."""
    browser.get_log("browser")  # what earlier tests left
    yield
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print("browser console:", *browser.get_log("browser"), sep="\n")
        print("page:", browser.current_url, browser.find_element(By.TAG_NAME, "body").text[-3000:])


def wait(
    driver: WebDriver, check: Callable[[WebDriver], Any], what: str, timeout: float = 30
) -> Any:
    """What `check` returns once it is truthy (elements replaced or not
    there yet count as not yet)."""
    waiting = WebDriverWait(
        driver, timeout, poll_frequency=0.1,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    )  # fmt: skip
    return waiting.until(check, f"waited {timeout}s for {what}")


def api(node: ClusterNode, path: str) -> dict[str, Any] | None:
    answer = request(f"http://{node.http}/api/v1/{path}")
    return json.loads(answer.body) if answer.status == 200 else None


def post(node: ClusterNode, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "X-Cortex-Request": "1"}
    data = json.dumps(body or {}).encode()
    answer = request(f"http://{node.http}/api/v1/{path}", method="POST", headers=headers, data=data)
    assert answer.status == 200, (path, answer.status, answer.body[:300])
    found: dict[str, Any] = json.loads(answer.body)
    return found


def task_state(node: ClusterNode, task_id: str) -> str | None:
    found = api(node, f"tasks/{task_id}")
    return found["task"]["state"] if found else None


def wait_state(node: ClusterNode, task_id: str, state: str, timeout: float = 60) -> None:
    wait_until(lambda: task_state(node, task_id) == state, timeout,
               what=f"task {task_id} {state} on {node.node_id}")  # fmt: skip


def confirm(driver: WebDriver) -> str:
    """Says yes in the confirmation dialog; what it asked."""
    wait(driver, lambda d: d.find_element(By.ID, "confirm").is_displayed(), "the dialog")
    asked: str = driver.find_element(By.ID, "confirm-message").text
    driver.find_element(By.ID, "confirm-yes").click()
    wait(driver, lambda d: not d.find_element(By.ID, "confirm").is_displayed(), "the dialog closed")
    return asked


def keep_screenshot(driver: WebDriver, folder: Path, name: str) -> None:
    shot = folder / name
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if os.environ.get("CORTEX_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOTS / name)


DAG_NODES = """return [...document.querySelectorAll('#dag g.dag-node')]
    .map((g) => [g.dataset.taskKey, g.dataset.state, g.dataset.taskId]);"""


def test_a_running_workflow_is_drawn_and_followed_live(
    cluster: Cluster, browser: WebDriver, tmp_path: Path
) -> None:
    with cluster.nodes[2].client() as client:
        workflow_id = client.submit_workflow(WORKFLOW).workflow_id
    viewer = cluster.nodes[0]
    browser.get(f"http://{viewer.http}/workflows/{workflow_id}")
    wait(browser, lambda d: len(d.execute_script(DAG_NODES)) == 5, "every task drawn")
    browser.execute_script("window.sameDocument = true;")
    seen: dict[str, list[str]] = {}
    final = {"fetch": "completed", "build": "completed", "ship": "completed",
             "rollback": "skipped", "lint": "failed"}  # fmt: skip

    def settled(driver: WebDriver) -> bool:
        drawn = driver.execute_script(DAG_NODES)
        for key, state, _ in drawn:
            if not seen.get(key) or seen[key][-1] != state:
                seen.setdefault(key, []).append(state)
        return len(drawn) == 5 and {key: state for key, state, _ in drawn} == final

    wait(browser, settled, "every task's final state", timeout=60)
    # Followed without loading the page again, each task seen moving on.
    assert browser.execute_script("return window.sameDocument === true;")
    assert set(seen) == set(final)
    assert seen["ship"][0] not in TERMINAL and seen["ship"][-1] == "completed", seen
    assert seen["rollback"][0] not in TERMINAL and seen["rollback"][-1] == "skipped", seen
    assert len({state for states in seen.values() for state in states}) >= 4, seen
    workflow = wait_until(lambda: (api(viewer, f"workflows/{workflow_id}") or {}).get("workflow"))
    ids = {task["key"]: task["task_id"] for task in workflow["tasks"]}
    drawn = {key: (state, task_id) for key, state, task_id in browser.execute_script(DAG_NODES)}
    assert drawn == {key: (final[key], ids[key]) for key in final}
    # One colour per state: each node carries its state's class.
    for key, state in final.items():
        node = browser.find_element(By.CSS_SELECTOR, f'#dag g.dag-node[data-task-key="{key}"]')
        assert f"state-{state}" in node.get_attribute("class").split()
    edges = browser.find_elements(By.CSS_SELECTOR, "#dag path.dag-edge")
    assert sorted((e.get_attribute("data-from"), e.get_attribute("data-to")) for e in edges) == [
        ("build", "rollback"), ("build", "ship"), ("fetch", "build"), ("fetch", "lint"),
    ]  # fmt: skip
    # Each condition once, on its task's incoming edge (in full on hover).
    written = {
        label.get_attribute("data-task-key"): label.get_attribute("textContent")
        for label in browser.find_elements(By.CSS_SELECTOR, "#dag text.dag-condition")
    }
    assert set(written) == {"ship", "rollback"}
    for key in written:
        condition = next(t["condition"] for t in workflow["tasks"] if t["key"] == key)
        assert f"if {condition}" in written[key]
    keep_screenshot(browser, tmp_path, "workflow.png")
    # A node opens its task.
    browser.find_element(By.CSS_SELECTOR, '#dag g.dag-node[data-task-key="lint"]').click()
    wait(browser, lambda d: urlsplit(d.current_url).path == f"/tasks/{ids['lint']}", "the task")
    wait(browser, lambda d: "style broken" in d.find_element(By.ID, "output-stderr").text,
         "the failed task's stderr")  # fmt: skip


def test_the_task_list_follows_its_url_and_cancels_what_it_matches(
    cluster: Cluster, browser: WebDriver
) -> None:
    batch = uuid.uuid4().hex[:8]
    labels = {"batch": batch, "owner": HOSTILE}
    submitter, viewer = cluster.nodes[0], cluster.nodes[1]
    with submitter.client() as client:
        ids = [client.submit_task(shell_spec("sleep 60", labels=labels)).task.id for _ in range(3)]
        done = client.submit_task(shell_spec(f"echo '{HOSTILE}'", labels=labels)).task.id
        other = client.submit_task(shell_spec("sleep 60", labels={"batch": "other"})).task.id
    for task_id in ids:
        wait_state(viewer, task_id, "running")
    wait_state(viewer, done, "completed")
    try:
        # A link from before views had paths leads to the same view.
        label = quote(f"batch={batch}", safe="")
        browser.get(f"http://{viewer.http}/#/tasks?state=running&label={label}")
        wait(browser, lambda d: urlsplit(d.current_url).path == "/tasks", "the tasks path")
        assert urlsplit(browser.current_url).query == f"state=running&label={label}"

        def rows(driver: WebDriver) -> list[WebElement]:
            return driver.find_elements(By.CSS_SELECTOR, "#tasks tr[data-task-id]")

        wait(browser, lambda d: len(rows(d)) == 3, "the three matching rows")
        # Newest first, every row the filter selects and no other.
        assert [row.get_attribute("data-task-id") for row in rows(browser)] == ids[::-1]
        for row in rows(browser):
            assert row.get_attribute("data-state") == "running"
            assert HOSTILE in row.text
        # Task data went in as text: the markup it holds made no element.
        assert browser.find_elements(By.TAG_NAME, "img") == []
        assert browser.title != "1"
        # The filters are the URL's, shown in the form.
        form = browser.find_element(By.CSS_SELECTOR, "form.filters")
        assert form.find_element(By.NAME, "state").get_attribute("value") == "running"
        assert form.find_element(By.NAME, "label").get_attribute("value") == f"batch={batch}"
        assert browser.find_element(By.ID, "task-total").text == "3 tasks match"

        # Confirmed for 3; a fourth matches by the time it is sent: asked again.
        wait(browser, lambda d: d.find_element(By.ID, "cancel-matching").is_enabled(), "the button")
        browser.find_element(By.ID, "cancel-matching").click()
        wait(browser, lambda d: d.find_element(By.ID, "confirm").is_displayed(), "the dialog")
        assert "3 tasks" in browser.find_element(By.ID, "confirm-message").text
        with submitter.client() as client:
            ids.append(client.submit_task(shell_spec("sleep 60", labels=labels)).task.id)
        wait_state(viewer, ids[-1], "running")
        browser.find_element(By.ID, "confirm-yes").click()
        wait(browser, lambda d: "4 tasks" in d.find_element(By.ID, "confirm-message").text
             and d.find_element(By.ID, "confirm").is_displayed(), "the new count asked")  # fmt: skip
        assert "More tasks match now" in confirm(browser)
        outcome = wait(browser, lambda d: d.find_element(By.ID, "bulk-outcome").text, "outcome")
        assert outcome.startswith("4 tasks cancelled of 4 matching"), outcome
        for task_id in ids:
            wait_state(viewer, task_id, "cancelled")
        wait(browser, lambda d: d.find_element(By.ID, "task-total").text == "0 tasks match"
             and not rows(d), "the cancelled tasks gone from the running ones")  # fmt: skip
        assert task_state(viewer, done) == "completed"
        assert task_state(viewer, other) == "running"
    finally:
        post(submitter, f"tasks/{other}/cancel")


def test_a_task_page_follows_its_output_live(cluster: Cluster, browser: WebDriver) -> None:
    command = "for i in $(seq 1 20); do echo line-$i; sleep 0.3; done; echo finished >&2"
    with cluster.nodes[1].client() as client:
        task_id = client.submit_task(shell_spec(command)).task.id
    browser.get(f"http://{cluster.nodes[2].http}/tasks/{task_id}")

    def stdout(driver: WebDriver) -> str:
        text: str = driver.find_element(By.ID, "output-stdout").text
        return text

    first = wait(browser, lambda d: "line-2\n" in stdout(d) and stdout(d), "the first lines")
    assert "line-20" not in first
    later = wait(browser, lambda d: len(stdout(d).split()) >= len(first.split()) + 3
                 and stdout(d), "more lines while it runs")  # fmt: skip
    assert later.startswith(first) and "line-20" not in later
    wait(browser, lambda d: "line-20" in stdout(d), "the last line")
    wait(browser, lambda d: d.find_element(By.ID, "output-stderr").text == "finished", "stderr")
    assert stdout(browser).split() == [f"line-{n}" for n in range(1, 21)]
    badge = "h1 .badge[data-state='completed']"
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, badge), "the task completed")
    assert not browser.find_element(By.ID, "cancel-task").is_displayed()


def test_a_running_task_is_cancelled_from_its_page(
    cluster: Cluster, browser: WebDriver, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(shell_spec(f"echo $$ > {pid_file}; exec sleep 120")).task.id
    browser.get(f"http://{cluster.nodes[1].http}/tasks/{task_id}")
    wait(browser, lambda d: d.find_element(By.ID, "cancel-task").is_displayed(), "Cancel shown")
    pid = wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, what="pid")
    assert pid_alive(int(pid))
    browser.find_element(By.ID, "cancel-task").click()
    assert task_id[:8] in confirm(browser)
    badge = "h1 .badge[data-state='cancelled']"
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, badge), "the task cancelled")
    assert not browser.find_element(By.ID, "cancel-task").is_displayed()
    wait_until(lambda: not pid_alive(int(pid)), 20, what="the task's process gone")


def test_nodes_are_cordoned_drained_and_uncordoned_from_their_page(
    cluster: Cluster, browser: WebDriver, tmp_path: Path
) -> None:
    target = cluster.nodes[2]
    browser.get(f"http://{cluster.nodes[0].http}/nodes")
    row = f'#nodes tr[data-node-id="{target.node_id}"]'

    def status(driver: WebDriver) -> str | None:
        found: str | None = driver.find_element(By.CSS_SELECTOR, row).get_attribute("data-status")
        return found

    def change(action: str, then: str) -> None:
        button = f'{row} button[data-action="{action}"]'
        wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, button).is_displayed(), action)
        browser.find_element(By.CSS_SELECTOR, button).click()
        assert target.node_id in confirm(browser)
        wait(browser, lambda d: status(d) == then, f"{target.node_id} {then}")

    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#nodes tr[data-node-id]")) == 3,
         "every node")  # fmt: skip
    try:
        assert status(browser) == "active"
        change("cordon", "cordoned")
        change("drain", "draining")
        change("uncordon", "active")
    finally:
        post(cluster.nodes[0], f"nodes/{target.node_id}/uncordon")
    # Capacity, allocation and use per resource; the running tasks' link.
    cells = browser.find_elements(By.CSS_SELECTOR, f'{row} td[data-resource="memory_mb"]')
    assert cells and "used" in cells[0].text
    running = browser.find_element(By.CSS_SELECTOR, f"{row} td.running a")
    assert urlsplit(running.get_attribute("href")).query == f"state=running&node={target.node_id}"
    keep_screenshot(browser, tmp_path, "nodes.png")


def test_the_cluster_page_shows_one_leader_and_equal_digests(
    cluster: Cluster, browser: WebDriver
) -> None:
    browser.get(f"http://{cluster.nodes[1].http}/cluster")
    members = "#members tr[data-node-id]"
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, members)) == 3, "every member")
    found = {
        row.get_attribute("data-node-id") for row in browser.find_elements(By.CSS_SELECTOR, members)
    }
    assert found == {node.node_id for node in cluster.nodes}
    leaders = browser.find_elements(By.CSS_SELECTOR, '#members tr[data-leader="true"]')
    assert len(leaders) == 1
    wait(browser, lambda d: d.find_element(By.ID, "digest-agreement").get_attribute(
        "data-agreement") == "same", "every member at one index and digest")  # fmt: skip

    def shown(cell: str) -> set[str]:
        return {e.get_attribute("title") or e.text
                for e in browser.find_elements(By.CSS_SELECTOR, f"#members td.{cell}")}  # fmt: skip

    digests, indexes = shown("digest"), shown("index")
    assert len(digests) == 1 and len(indexes) == 1 and "–" not in digests, (digests, indexes)
    assert browser.find_elements(By.CSS_SELECTOR, "#events tr[data-seq]")


def test_an_unknown_path_shows_a_page_saying_so(cluster: Cluster, browser: WebDriver) -> None:
    base = f"http://{cluster.nodes[0].http}"
    answer = request(f"{base}/no/such/page")
    assert answer.status == 404 and answer.headers["Content-Type"].startswith("text/html")
    browser.get(f"{base}/no/such/page")
    shown = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".not-found").text, "404")
    assert "No such page" in shown and "/no/such/page" in shown


def test_with_a_token_the_page_asks_for_it(
    make_cluster: Callable[..., Cluster], browser: WebDriver
) -> None:
    (node,) = make_cluster(1, api_token=TOKEN).nodes
    with node.client() as client:
        task_id = client.submit_task(shell_spec("echo logged in")).task.id
    try:
        browser.get(f"http://{node.http}/tasks")
        field = wait(browser, lambda d: d.find_element(By.NAME, "token"), "the login form")
        assert field.get_attribute("type") == "password"
        assert browser.find_elements(By.TAG_NAME, "table") == []  # nothing of the cluster's
        field.send_keys("wrong-token")
        browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
        refused = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".login .error").text,
                       "the refusal")  # fmt: skip
        assert "not the API token" in refused
        field = browser.find_element(By.NAME, "token")
        field.clear()
        field.send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
        row = f'#tasks tr[data-task-id="{task_id}"]'
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, row), "the tasks, logged in")
        assert browser.find_element(By.ID, "logout").is_displayed()
        # Logged in, `/` can tell there is no workflow: the tasks page.
        browser.get(f"http://{node.http}/")
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, row), "the front page")
        assert urlsplit(browser.current_url).path == "/tasks"
    finally:
        browser.delete_all_cookies()
