"""Runs one seed: a whole cluster in this process, driven by simulated time.

Everything that could differ between two runs of the same seed is pinned
here: pysyncobj's clock and election randomness, entry ids and timestamps,
the network's delays, the workload and the faults all come from the seed;
nothing runs on another thread; `PYTHONHASHSEED` must be fixed (the script
re-executes itself to fix it), since set iteration orders reach the log."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import sqlite3
import tempfile
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pysyncobj.syncobj

from cortex import failstop
from cortex.agent.runner import Agent
from cortex.raft import transport as raft_transport
from cortex.scheduler import filters as scheduler_filters
from cortex.sim import checks
from cortex.sim import components as sim_components
from cortex.sim.clock import SimClock
from cortex.sim.components import NodeComponents
from cortex.sim.executor import SimLauncher
from cortex.sim.faults import FaultPlan
from cortex.sim.invariants import (
    LIVENESS,
    NO_ACKNOWLEDGED_WRITE_LOST,
    NO_UNEXPECTED_EXCEPTION,
    NODE_STARTS,
    SCHEDULER_RESPECTS_NODES,
    DigestLedger,
    Failure,
)
from cortex.sim.network import SimNetwork
from cortex.sim.node import NodeStopped, SimNode, raft_address
from cortex.sim.sandbox import InlineSandbox
from cortex.sim.trace import Trace
from cortex.sim.workload import Workload
from cortex.state import entries
from cortex.state.queries import StateReader

# Each live node runs its loop at least this often (simulated).
TICK_US = 40_000
# After the faults stop, how long the cluster has to converge.
HEAL_LIMIT_US = 30_000_000
# How often (simulated) the end-of-run conditions are looked at.
CHECK_EVERY_US = 100_000
# In liveness mode clients stop this long before the end, so the cluster can settle.
QUIET_US = 20_000_000


@dataclass(frozen=True)
class SimConfig:
    seed: int
    nodes: int = 3
    duration_s: float = 60.0
    mode: str = "safety"  # or "liveness"
    unsafe_no_sync: bool = False
    keep_trace: bool = False
    # A scheduler bug planted for the checker to find (tests only).
    planted_bug: str | None = None


@dataclass
class SimResult:
    seed: int
    failures: list[Failure]
    trace_hash: str
    simulated_s: float
    wall_s: float
    faults: int
    acknowledged: int
    stats: dict[str, Any] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)


def _active_or_draining(task: Any, node: Any, load: Any) -> str | None:
    if node.status == "draining":
        return None
    return scheduler_filters.node_is_active(task, node, load)


def _passed_through(sync_obj: Any, node: Any, message: Any) -> Any:
    return message


def _unchanged(message: Any) -> Any:
    return message


def _no_record(*args: Any) -> None:
    return None


# Bugs a test plants to show the checker finds them, each a patch made for one
# run: (module, attribute, what replaces it given the original).
PLANTED_BUGS: dict[str, tuple[Any, str, Any]] = {
    # The scheduler takes draining nodes for active ones.
    "assign-to-draining": (
        scheduler_filters,
        "FILTERS",
        lambda filters: tuple(
            _active_or_draining if f is scheduler_filters.node_is_active else f for f in filters
        ),
    ),
    # pysyncobj as released: a follower commits from appends that carry no
    # log position to check.
    "raft-unchecked-commit": (
        raft_transport,
        "without_unchecked_commit",
        lambda original: _unchanged,
    ),
    # pysyncobj as released: late refusals move a leader's next index forward.
    "raft-late-refusals": (raft_transport, "_backtrack_only", lambda original: _passed_through),
    # pysyncobj as released: late acceptances move a leader's next index back.
    "raft-next-index-back": (raft_transport, "_keep_next_index", lambda original: _passed_through),
    # pysyncobj as released: an append that matches a follower's log cuts off
    # the entries after it.
    "raft-cut-matching": (
        raft_transport,
        "keep_matching_entries",
        lambda original: _not_kept,
    ),
    # The agent starts every attempt assigned to its node at once, however
    # many its node's scheduler sent it to wait for a slot.
    "agent-ignores-slots": (Agent, "_free_slots", lambda original: _no_record),
    # A node forgets it asked to join with its data dir, so a removal it finds
    # in its log on restart (it was down) looks like an old one: it joins again.
    "rejoin-after-removal": (sim_components, "joining_since", lambda original: _no_record),
}


def _not_kept(sync_obj: Any, message: Any) -> tuple[Any, None]:
    return message, None


class _SeededIds:
    """Random UUIDs for entries and new ids (`entries.randomness`), from the seed."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)


class _SimTime:
    def __init__(self, clock: SimClock) -> None:
        self._clock = clock

    def time(self) -> float:
        return self._clock.time()


@contextlib.contextmanager
def _pinned(clock: SimClock, rng: random.Random, planted_bug: str | None) -> Iterator[None]:
    """Routes every source of time and randomness the code under test reads
    to the simulation, for the duration of a run."""
    saved = (
        pysyncobj.syncobj.monotonicTime,
        pysyncobj.syncobj.random,
        entries.time,
        entries.randomness,
        logging.root.manager.disable,
    )
    pysyncobj.syncobj.monotonicTime = clock.monotonic
    pysyncobj.syncobj.random = random.Random(rng.getrandbits(64))
    entries.time = _SimTime(clock)  # type: ignore[assignment]
    entries.randomness = _SeededIds(random.Random(rng.getrandbits(64)))  # type: ignore[assignment]

    def stop(what: str, err: BaseException, advice: str) -> NoReturn:
        raise NodeStopped(what, err)

    failstop.set_stop_handler(stop)
    logging.disable(logging.CRITICAL)
    # Deriving the cluster key costs PBKDF2 on every start; it never changes.
    encryptor = pysyncobj.syncobj.getEncryptor
    pysyncobj.syncobj.getEncryptor = functools.lru_cache(maxsize=None)(encryptor)
    planted = None
    if planted_bug is not None:
        module, name, replace = PLANTED_BUGS[planted_bug]
        planted = (module, name, getattr(module, name))
        setattr(module, name, replace(planted[2]))
    try:
        yield
    finally:
        if planted is not None:
            setattr(*planted)
        pysyncobj.syncobj.getEncryptor = encryptor
        (
            pysyncobj.syncobj.monotonicTime,
            pysyncobj.syncobj.random,
            entries.time,
            entries.randomness,
            _,
        ) = saved
        failstop.set_stop_handler(None)
        logging.disable(saved[4])


class Simulation:
    def __init__(self, config: SimConfig, root: str) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.clock = SimClock()
        self.trace = Trace(self.clock, keep=config.keep_trace)
        self.network = SimNetwork(self.clock, random.Random(self.rng.getrandbits(64)), self.trace)
        self.ledger = DigestLedger()
        # Each node process's launcher, for the attempts it ran at once.
        self._launchers: list[tuple[str, SimLauncher]] = []
        self.failures: list[Failure] = []
        ids = [f"n{i}" for i in range(1, config.nodes + 1)]
        peers = [raft_address(i) for i in ids]
        self.sandbox = InlineSandbox()
        self._component_rng = random.Random(self.rng.getrandbits(64))
        self.nodes = {
            node_id: SimNode(
                node_id,
                os.path.join(root, node_id),
                peers,
                self.clock,
                self.network,
                self.trace,
                sync=not config.unsafe_no_sync,
                on_applied=self._applied,
                labels={"zone": "a" if number % 2 else "b"},
                build_components=self._components,
            )
            for number, node_id in enumerate(ids, 1)
        }
        self.by_address = {node.address: node for node in self.nodes.values()}
        self.workload = Workload(self, random.Random(self.rng.getrandbits(64)))
        self.faults = FaultPlan(self, random.Random(self.rng.getrandbits(64)))
        self.duration_us = int(config.duration_s * 1_000_000)
        self.faults_until_us = (
            self.duration_us // 2 if config.mode == "liveness" else self.duration_us
        )

    # -- bookkeeping ----------------------------------------------------------

    @property
    def now_s(self) -> float:
        return self.clock.now_us / 1_000_000

    def fail(self, invariant: str, detail: str) -> None:
        failure = Failure(invariant, round(self.now_s, 3), detail)
        self.failures.append(failure)
        self.trace.add("FAILED", invariant, detail)

    def _applied(self, node: str, index: int, digest: str) -> None:
        self.ledger.record(node, index, digest, round(self.now_s, 3))

    def _components(self, node: SimNode) -> NodeComponents:
        components = NodeComponents(
            node,
            random.Random(self._component_rng.getrandbits(64)),
            self.sandbox,
            lambda address: address.replace(":7300", ":7100"),
        )
        assert node.proposer is not None
        node.proposer.watch = lambda entry: self._check_round(node, components.reader, entry)
        self._launchers.append((node.id, components.launcher))
        return components

    def _check_round(self, node: SimNode, reader: StateReader, entry: Any) -> None:
        """Invariant 4: each scheduling round, on the state it was decided from."""
        if entry.type != "TASK_ASSIGN":
            return
        for problem in checks.scheduling_round(reader, entry.payload.get("assignments", [])):
            self.fail(SCHEDULER_RESPECTS_NODES, f"{node.id} as leader: {problem}")

    def start_node(self, node: SimNode) -> None:
        if node.retired:
            return
        try:
            node.start()
        except NodeStopped as err:
            node.fail_stop(str(err))
        except Exception as err:  # the start-up check refusing is a finding
            self.fail(NODE_STARTS, f"{node.id} could not start: {type(err).__name__}: {err}")
            node.running = False

    # -- the loop ---------------------------------------------------------------

    def run(self) -> None:
        for node in self.nodes.values():
            self.start_node(node)
        quiet = QUIET_US if self.config.mode == "liveness" else 0
        self.workload.schedule(max(self.duration_us - quiet, 0))
        self.faults.schedule(self.faults_until_us)
        self._run_until(self.faults_until_us)
        self.faults.heal()
        self.trace.add("heal")
        healed_at = self.clock.now_us
        if self.config.mode == "liveness":
            acknowledged = len(self.workload.acknowledged)
            # The backlog left when clients stop gets the same grace as safety
            # mode's convergence (a node may have been removed, others
            # cordoned), plus how far a clock ran ahead: a report stamped by a
            # node whose clock was ahead starts its retry's back-off that much
            # later, after the clocks are right again.
            end = self.duration_us + HEAL_LIMIT_US + self.faults.max_ahead_us
            self._run_until(end, until=self._converged_and_quiet)
            self._check_converged(self.clock.now_us, healed_at)
            if len(self.workload.acknowledged) == acknowledged and self.workload.attempted_after(
                healed_at
            ):
                self.fail(LIVENESS, "no submission was acknowledged after the faults healed")
        else:
            self._run_until(self.duration_us + HEAL_LIMIT_US, until=self._converged)
        self._check_acknowledged()
        self._check_history()
        self.failures[:0] = self.ledger.failures

    def _run_until(self, end_us: int, until: Any = None) -> None:
        """Runs the cluster until `end_us`, or until `until()` holds (looked at
        every `CHECK_EVERY_US` of simulated time)."""
        next_check = self.clock.now_us
        while self.clock.now_us < end_us:
            if until is not None and self.clock.now_us >= next_check:
                if until():
                    return
                next_check = self.clock.now_us + CHECK_EVERY_US
            live = [n for n in self.nodes.values() if n.running and not n.paused]
            due = {node.id: node.next_event_at() for node in live}
            upcoming = [end_us, *due.values()]
            for source in (self.faults, self.workload, self.network):
                at = source.next_at()
                if at is not None:
                    upcoming.append(at)
            self.clock.now_us = max(self.clock.now_us, min(upcoming))
            self.faults.run_due()
            self.workload.run_due()
            self.network.deliver_due(self._receiving)
            now = self.clock.now_us
            for node in live:
                if not node.running or node.paused:
                    continue
                if due[node.id] <= now or node.wants_step:
                    self._step(node)

    def _receiving(self, address: str) -> bool:
        node = self.by_address[address]
        return node.running and not node.paused

    def _step(self, node: SimNode) -> None:
        try:
            node.step()
        except NodeStopped as err:
            node.fail_stop(str(err))
            self.faults.stopped(node)
        except Exception as err:  # noqa: BLE001 - any escape is the finding
            where = traceback.extract_tb(err.__traceback__)[-1]
            self.fail(
                NO_UNEXPECTED_EXCEPTION,
                f"{node.id}: {type(err).__name__}: {err} at {where.filename}:{where.lineno}",
            )
            node.fail_stop(f"raised {type(err).__name__}")
            self.faults.stopped(node)
        if node.removal is not None and node.running:
            # It applied its own removal: the process stops itself for good.
            node.retired = True
            node.fail_stop(f"removed from the cluster ({node.removal})")
        node.next_tick_us = self.clock.now_us + TICK_US

    def highest_term(self) -> int:
        """The highest Raft term a running node is at: how many elections
        the run took, give or take the ones that raised no term."""
        return max(
            (int(n.group.raftCurrentTerm) for n in self.nodes.values() if n.running and n.group),
            default=0,
        )

    # -- checks -----------------------------------------------------------------

    def _statuses(self) -> list[tuple[str, int, str]]:
        out = []
        for node in self.nodes.values():
            if node.running and node.machine is not None:
                out.append((node.id, node.machine.applied_index, node.machine.digest()))
        return out

    def _converged(self) -> bool:
        statuses = self._statuses()
        if len(statuses) < sum(not node.retired for node in self.nodes.values()):
            return False
        leaders = [n for n in self.nodes.values() if n.group is not None and n.group.is_leader]
        if len(leaders) != 1 or self.workload.in_flight():
            return False
        group = leaders[0].group
        assert group is not None
        committed = group.raftCommitIndex
        # A new leader commits what earlier terms left in its log only with
        # an entry of its own: until then its commit index says too little.
        if committed < group._SyncObj__getCurrentLogIndex():
            return False
        # Raft's own applied index: the last committed entries may be Raft's
        # (a new leader's no-op, a membership change), which SQLite never sees.
        caught_up = all(
            node.group.raftLastApplied >= committed
            for node in self.nodes.values()
            if node.running and node.group is not None
        )
        return caught_up and len({(index, digest) for _, index, digest in statuses}) == 1

    def _converged_and_quiet(self) -> bool:
        return self.workload.next_at() is None and self._converged() and self._all_done()

    def _best(self) -> SimNode | None:
        running = [n for n in self.nodes.values() if n.machine is not None]
        return max(running, key=lambda n: n.machine.applied_index if n.machine else -1,
                   default=None)  # fmt: skip

    def _all_done(self) -> bool:
        best = self._best()
        if best is None or best.machine is None:
            return False
        return checks.terminal_counts(best.machine._conn) == (0, 0)

    def _check_history(self) -> None:
        """Invariants 3 and 5 on the node that applied the most, and in
        liveness mode that every task and workflow ended; and that no node
        ran more attempts at once than its max_tasks."""
        for node_id, launcher in self._launchers:
            if launcher.most_at_once > sim_components.MAX_TASKS:
                self.fail(
                    SCHEDULER_RESPECTS_NODES,
                    f"{node_id} ran {launcher.most_at_once} attempts at once,"
                    f" over its max_tasks {sim_components.MAX_TASKS}",
                )
        best = self._best()
        if best is None or best.machine is None:
            return
        conn = sqlite3.connect(f"file:{best.machine.path}?mode=ro", uri=True)
        try:
            for invariant, detail in checks.completions_and_fencing(conn):
                self.fail(invariant, detail)
            for invariant, detail in checks.workflow_rules(conn):
                self.fail(invariant, detail)
            for invariant, detail in checks.outcomes(conn):
                self.fail(invariant, detail)
            for invariant, detail in checks.limits_and_slots(conn):
                self.fail(invariant, detail)
            unfinished = checks.terminal_counts(conn)
        finally:
            conn.close()
        if self.config.mode == "liveness" and unfinished != (0, 0):
            self.fail(
                LIVENESS,
                f"{unfinished[0]} tasks and {unfinished[1]} workflows unfinished on {best.id}"
                f" {(self.clock.now_us - self.faults_until_us) / 1e6:g}s after healing",
            )

    def _check_converged(self, deadline_us: int, healed_at_us: int) -> None:
        if not self._converged():
            statuses = ", ".join(f"{n} at {i}" for n, i, _ in self._statuses())
            leaders = [n.id for n in self.nodes.values() if n.group and n.group.is_leader]
            self.fail(
                LIVENESS,
                f"{(deadline_us - healed_at_us) / 1e6:g}s after healing: leaders {leaders},"
                f" nodes {statuses or 'none running'}",
            )

    def _check_acknowledged(self) -> None:
        """Invariant 2, on the node that applied the most."""
        best = max(
            (n for n in self.nodes.values() if n.machine is not None),
            key=lambda n: n.machine.applied_index if n.machine else -1,
            default=None,
        )
        if best is None or best.machine is None:
            if self.workload.acknowledged:
                self.fail(NO_ACKNOWLEDGED_WRITE_LOST, "no node is running to hold them")
            return
        conn = sqlite3.connect(f"file:{best.machine.path}?mode=ro", uri=True)
        try:
            present = {row[0] for row in conn.execute("SELECT id FROM tasks")}
        finally:
            conn.close()
        lost = sorted(set(self.workload.acknowledged) - present)
        conn = sqlite3.connect(f"file:{best.machine.path}?mode=ro", uri=True)
        try:
            workflows = {row[0] for row in conn.execute("SELECT id FROM workflows")}
        finally:
            conn.close()
        lost += sorted(set(self.workload.workflows) - workflows)
        if lost:
            self.fail(
                NO_ACKNOWLEDGED_WRITE_LOST,
                f"{len(lost)} of {len(self.workload.acknowledged)} acknowledged submissions"
                f" missing on {best.id} (applied {best.machine.applied_index}), e.g. {lost[0]}",
            )


def run_seed(config: SimConfig) -> SimResult:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"cortex-sim-{config.seed}-") as root:
        sim = Simulation(config, root)
        with _pinned(sim.clock, sim.rng, config.planted_bug):
            try:
                sim.run()
                highest_term = sim.highest_term()
            finally:
                for node in sim.nodes.values():
                    if node.running:
                        node.fail_stop("end of run")
    return SimResult(
        seed=config.seed,
        failures=sim.failures,
        trace_hash=sim.trace.hexdigest(),
        simulated_s=round(sim.clock.now_us / 1e6, 3),
        wall_s=round(time.perf_counter() - started, 3),
        faults=sim.faults.injected,
        acknowledged=len(sim.workload.acknowledged),
        stats={
            "messages": sim.network.sent,
            "dropped": sim.network.dropped,
            "trace_events": sim.trace.count,
            "highest_term": highest_term,
        },  # fmt: skip
        trace=sim.trace.lines,
    )
