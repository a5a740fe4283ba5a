"""Task listings matched on labels and text over a real state database
(`StateReader.list_tasks` with a `TaskMatch`, as the web API asks for them):
labels (a key, or a key with its value), text in the id, the command (argv
joined, or the shell string) or a label, matched literally (`%` and `_` are
not wildcards) and ASCII letters in any case; with states, node and workflow
too, newest first, page by page with the total of all matches, the same
pages as the listing without a match when it matches everything."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.spec import parse_task_spec
from cortex.state import entries as e
from cortex.state.paging import PageKey
from cortex.state.queries import StateReader
from cortex.state.task_match import TaskMatch
from tests.workflow_sim import WorkflowLog

SPECS: dict[str, dict[str, Any]] = {
    "t-build": {"command": ["make", "build"], "labels": {"team": "web", "tier": "1"}},
    "t-test": {"command": "make test && echo 100%", "labels": {"team": "web"}},
    "t-deploy": {"command": ["deploy.sh", "--to", "prod_eu"], "labels": {"team": "ops"}},
    "t-idle": {"type": "noop", "labels": {"note": "a=b"}},
    "t-plain": {"command": ["echo", "Hello"]},
}


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkflowLog]:
    log = WorkflowLog(Path(tmp_path_factory.mktemp("search")) / "state.db")
    for task_id, spec in SPECS.items():
        canonical = parse_task_spec(spec).model_dump(mode="json")
        assert log.one(e.TaskSubmit(task_id, canonical))["ok"]
    assert log.one(e.TaskAssign([{"task_id": "t-test", "node": "n2", "attempt": 1}]))["ok"]
    yield log
    log.close()


@pytest.fixture(scope="module")
def reads(log: WorkflowLog) -> StateReader:
    return StateReader(log.machine.path)


def search(
    reads: StateReader,
    limit: int,
    after: PageKey | None,
    states: tuple[str, ...] = (),
    workflow_id: str | None = None,
    node: str | None = None,
    labels: tuple[tuple[str, str | None], ...] = (),
    text: str = "",
) -> Any:
    return reads.list_tasks(
        list(states) or None, None, workflow_id, node, limit, after, newest_first=True,
        match=TaskMatch(labels, text),
    )  # fmt: skip


def found(reads: StateReader, **filters: Any) -> list[str]:
    page = search(reads, 100, None, **filters)
    assert page.total == len(page.tasks)
    return [task.id for task in page.tasks]


def test_labels_match_by_key_or_by_key_and_value(reads: StateReader) -> None:
    assert found(reads, labels=(("team", None),)) == ["t-deploy", "t-test", "t-build"]
    assert found(reads, labels=(("team", "web"),)) == ["t-test", "t-build"]
    assert found(reads, labels=(("team", "web"), ("tier", "1"))) == ["t-build"]
    assert found(reads, labels=(("team", "WEB"),)) == []
    # A value holding "=" is matched whole.
    assert found(reads, labels=(("note", "a=b"),)) == ["t-idle"]
    assert found(reads, labels=(("note", "a"),)) == []


def test_text_matches_ids_commands_and_labels_literally(reads: StateReader) -> None:
    assert found(reads, text="make build") == ["t-build"]  # argv joined with spaces
    assert found(reads, text="MAKE") == ["t-test", "t-build"]
    assert found(reads, text="100%") == ["t-test"]
    assert found(reads, text="0%") == ["t-test"]
    assert found(reads, text="%") == ["t-test"]
    assert found(reads, text="prod_eu") == ["t-deploy"]
    assert found(reads, text="pro_") == []  # `_` is no wildcard: "prod" does not match
    assert found(reads, text="t-idl") == ["t-idle"]  # the id
    assert found(reads, text="team=ops") == ["t-deploy"]  # a label as key=value
    assert found(reads, text="hello") == ["t-plain"]
    assert found(reads, text="nothing like it") == []


def test_state_node_and_text_apply_together(reads: StateReader) -> None:
    assert found(reads, states=("assigned",), text="make") == ["t-test"]
    assert found(reads, node="n2", labels=(("team", None),)) == ["t-test"]
    assert found(reads, states=("queued",), labels=(("team", "web"),)) == ["t-build"]
    assert found(reads, workflow_id="no-such-workflow", text="make") == []


def test_pages_continue_newest_first_with_the_total(log: WorkflowLog, reads: StateReader) -> None:
    states = ("queued", "assigned")
    seen: list[str] = []
    after: PageKey | None = None
    while True:
        page = search(reads, 2, after, states=states)
        assert page.total == 5
        seen += [task.id for task in page.tasks]
        after = page.next_key
        if after is None:
            break
    assert seen == list(SPECS)[::-1]
    # The state's own listing pages the same tasks the same way.
    own = log.reader.list_tasks(["queued", "assigned"], limit=2, newest_first=True)
    assert [t.id for t in own.tasks] == seen[:2] and own.next_key == search(
        reads, 2, None, states=states
    ).next_key
