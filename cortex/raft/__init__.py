"""The pysyncobj Raft group: proposing entries, leadership, membership, snapshots."""

from cortex.raft.group import RaftGroup, RaftSettings
from cortex.raft.proposer import Proposer

__all__ = ["Proposer", "RaftGroup", "RaftSettings"]
