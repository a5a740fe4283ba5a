"""The indexes led by a task's workflow hold workflow tasks only (migration
13), and the queries that name a workflow still search them."""

import pytest

from cortex.state.machine import StateMachine
from cortex.state.schema import MIGRATIONS, connect

WORKFLOW_INDEXES = (
    "tasks_by_workflow",
    "tasks_by_workflow_key",
    "tasks_by_workflow_state",
    "tasks_by_workflow_pos",
    "tasks_by_workflow_submit",
)

# The shapes of the workflow queries in cortex.state (listings, counts by
# state, a task by key, the dependency joins).
QUERIES = {
    "tasks_by_workflow_submit": (
        "SELECT id FROM tasks WHERE workflow_id = 'w' ORDER BY submit_index, id LIMIT 50"
    ),
    "tasks_by_workflow_state": (
        "SELECT workflow_id, state, COUNT(*) FROM tasks WHERE workflow_id IN ('w', 'v')"
        " GROUP BY workflow_id, state"
    ),
    "tasks_by_workflow_key": (
        "SELECT t.id FROM task_dependencies d"
        " CROSS JOIN tasks t ON t.workflow_id = d.workflow_id AND t.workflow_key = d.task_key"
        " WHERE d.workflow_id = 'w'"
    ),
    "tasks_by_workflow_pos": (
        "SELECT id FROM tasks WHERE workflow_id = 'w' AND workflow_pos IN (1, 2)"
    ),
}


def _database(path: str, migrations: int) -> None:
    conn = connect(path)
    for number, script in enumerate(MIGRATIONS[:migrations], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.close()


@pytest.fixture
def upgraded(tmp_path):
    """A database made by the migrations before 13, then opened by a node."""
    path = str(tmp_path / "state.db")
    _database(path, 12)
    StateMachine(path).close()
    conn = connect(path)
    yield conn
    conn.close()


def test_every_workflow_index_leaves_standalone_tasks_out(upgraded):
    rows = dict(
        upgraded.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks'"
        ).fetchall()
    )
    for name in WORKFLOW_INDEXES:
        assert rows[name].endswith("WHERE workflow_id IS NOT NULL"), rows[name]
    led_by_workflow = {
        name for name in rows if rows[name] and "ON tasks (workflow_id" in rows[name]
    }
    assert led_by_workflow == set(WORKFLOW_INDEXES)


@pytest.mark.parametrize("index", sorted(QUERIES))
def test_a_query_naming_a_workflow_searches_its_index(upgraded, index):
    plan = " / ".join(row[3] for row in upgraded.execute(f"EXPLAIN QUERY PLAN {QUERIES[index]}"))
    assert f"INDEX {index} " in plan, plan
    assert "SCAN t " not in plan and not plan.startswith("SCAN tasks"), plan
