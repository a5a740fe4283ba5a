"""Pre-vote (the Raft thesis, section 9.6): a voter whose election deadline
passes first asks the others whether they would vote for it, without
raising its term, and stands for election only once a majority say yes.

pysyncobj stands at once, a term higher each time. A voter cut off from
the others (a partition, a firewall, a cable) kept standing and raising its
term all the while; when it could reach them again, its term deposed the
leader that had served the rest all along, and the cluster went without
one for an election (the simulator: a follower cut off for 6 s came back at
term 7 to a leader at term 1). A voter says no while it hears from a
leader, so such a node wins nothing and keeps its term: the leader's next
append brings it back.

Neither side changes anything to answer, except terms, as Raft has any
message do: a voter adopts a higher term a reply carries, and one asked by
a node already at a higher term than its own adopts that term (a leader
steps down). pysyncobj's leader never learns a higher term from the
followers' answers to its appends, so a node that did start an election the
others never heard of (cut off just after a majority said yes) would
otherwise be stranded at its term, refused by everyone for good.

A leadership transfer (pysyncobj's `timeout_now`) stands at once: the
leader asked for it, and its followers, still hearing from it, would say no."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pysyncobj.syncobj
from pysyncobj.syncobj import _RAFT_STATE

log = logging.getLogger(__name__)

REQUEST = "cortex_pre_vote"
REPLY = "cortex_pre_vote_reply"


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class PreVote:
    """The pre-vote rounds of one voter, `group` (a SyncObj), and its
    answers to the others'. pysyncobj's Raft thread calls everything here."""

    def __init__(self, group: Any, hears_from_leader: Callable[[], bool]) -> None:
        self._group = group
        # Whether an append from a leader arrived within the shortest
        # election timeout: a voter that says so says no.
        self._hears_from_leader = hears_from_leader
        self._round = 0
        self._asked_term: int | None = None
        self._grants: set[str] = set()
        # The term a majority said they would vote for this node at.
        self._won_term: int | None = None

    # -- standing ------------------------------------------------------------------

    def before_standing(self) -> bool:
        """Called once the election deadline of this voter (a follower or a
        candidate) has passed, before pysyncobj's tick looks at it: True,
        for pysyncobj to start the election, when a majority said they
        would vote (or no one need be asked); otherwise starts a pre-vote
        round, moves the deadline on and says False."""
        group = self._group
        # pysyncobj's own test (the group's answers only as this one allows).
        if not pysyncobj.syncobj.SyncObj._SyncObj__connectedToAnyone(group):
            return False  # pysyncobj stands for nothing then either
        if group._SyncObj__transferInProgress or not group._SyncObj__otherNodes:
            return True
        term = group._SyncObj__raftCurrentTerm
        if self._won_term == term + 1:
            self._won_term = None
            return True
        self._start(term + 1)
        return False

    def _start(self, term: int) -> None:
        group = self._group
        self._round += 1
        self._asked_term = term
        self._won_term = None
        self._grants = {str(group._SyncObj__selfNode)}
        request = {
            "type": REQUEST,
            "term": term,
            "round": self._round,
            "last_log_index": group._SyncObj__getCurrentLogIndex(),
            "last_log_term": group._SyncObj__getCurrentLogTerm(),
        }
        for node in group._SyncObj__otherNodes:
            group._SyncObj__transport.send(node, request)
        group._SyncObj__raftElectionDeadline = (
            pysyncobj.syncobj.monotonicTime() + group._SyncObj__generateRaftTimeout()
        )

    # -- messages ------------------------------------------------------------------

    def handles(self, node: Any, message: dict[str, Any]) -> bool:
        """Sees a message before pysyncobj does; True for a pre-vote's, which
        is this module's alone."""
        kind = message.get("type")
        if kind == REQUEST:
            self._answer(node, message)
            return True
        if kind == REPLY:
            self._count(node, message)
            return True
        return False

    def _answer(self, node: Any, message: dict[str, Any]) -> None:
        group = self._group
        if group._SyncObj__selfNode is None:
            return  # an observer has no vote
        asked = _number(message.get("term"))
        round_ = _number(message.get("round"))
        last_index = _number(message.get("last_log_index"))
        last_term = _number(message.get("last_log_term"))
        if asked is None or round_ is None or last_index is None or last_term is None:
            return
        if asked - 1 > group._SyncObj__raftCurrentTerm:
            self._adopt(asked - 1, f"asked by {node} for a pre-vote")
        group._SyncObj__transport.send(
            node,
            {
                "type": REPLY,
                "term": group._SyncObj__raftCurrentTerm,
                "asked": asked,
                "round": round_,
                "granted": self._would_vote(asked, last_index, last_term),
            },
        )

    def _would_vote(self, asked: int, last_index: int, last_term: int) -> bool:
        """Whether this voter would vote at term `asked` for a log ending at
        (`last_term`, `last_index`), hearing from no leader."""
        group = self._group
        if asked < group._SyncObj__raftCurrentTerm:
            return False
        if group._SyncObj__raftState == _RAFT_STATE.LEADER or (
            group._SyncObj__raftLeader is not None and self._hears_from_leader()
        ):
            return False
        own_term = group._SyncObj__getCurrentLogTerm()
        if last_term != own_term:
            return bool(last_term > own_term)
        return bool(last_index >= group._SyncObj__getCurrentLogIndex())

    def _count(self, node: Any, message: dict[str, Any]) -> None:
        group = self._group
        term = _number(message.get("term"))
        if term is None:
            return
        if term > group._SyncObj__raftCurrentTerm:
            self._adopt(term, f"in {node}'s pre-vote reply")
            return
        if (
            message.get("granted") is not True
            or message.get("round") != self._round
            or message.get("asked") != self._asked_term
            or self._asked_term != group._SyncObj__raftCurrentTerm + 1
            or group._SyncObj__raftState == _RAFT_STATE.LEADER
        ):
            return
        self._grants.add(str(node))
        if len(self._grants) > (len(group._SyncObj__otherNodes) + 1) / 2:
            self._won_term = self._asked_term
            self._asked_term = None
            # pysyncobj's next tick starts the election.
            group._SyncObj__raftElectionDeadline = 0

    def _adopt(self, term: int, where: str) -> None:
        """Takes a higher term seen `where`, as a follower with no vote cast
        and no leader known, as pysyncobj does for a vote request."""
        group = self._group
        log.info("term %d seen %s: following at it", term, where)
        group._SyncObj__setCurrentTerm(term, None)
        group._SyncObj__setState(_RAFT_STATE.FOLLOWER)
        group._SyncObj__raftLeader = None
        self._asked_term = None
        self._won_term = None
