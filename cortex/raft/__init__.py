"""The pysyncobj Raft group: proposing entries, leadership, membership, snapshots."""

from cortex.raft.group import RaftGroup, RaftSettings
from cortex.raft.proposer import EntrySubmitter, Proposer

__all__ = ["EntrySubmitter", "Proposer", "RaftGroup", "RaftSettings"]
