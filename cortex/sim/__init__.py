"""Deterministic simulation: whole Cortex clusters in one process, on real
state machines (SQLite files) and real Raft code (pysyncobj), with a
simulated network, clock and disk driven from one seed. See `harness`."""

from cortex.sim.harness import PLANTED_BUGS, SimConfig, SimResult, run_seed

__all__ = ["PLANTED_BUGS", "SimConfig", "SimResult", "run_seed"]
