"""Joining by challenge-response. A joining node first asks the node it
joins through for a nonce (random, kept in that node's memory for a short
time, good for one attempt), then proves the cluster secret with an HMAC
over the nonce, its node id and its addresses. A captured join is useless:
its nonce is spent, and a fresh nonce needs a fresh proof. The node joined
through adds the new one to the Raft group's voters once its proof holds;
an observer is added to nothing (it connects to the voters as a read-only
node), so it only gets their addresses."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cortex.errors import InvalidArgument, Unauthenticated, Unavailable
from cortex.raft.group import RaftGroup
from cortex.raft.proposer import Proposer

CHALLENGE_TTL_S = 30.0
# Nonces outstanding at once; the oldest go first (a joining node answers
# its own within milliseconds, so a flood of requests only costs a retry).
MAX_CHALLENGES = 1024


@dataclass(frozen=True)
class JoinClaim:
    """Who a joining node says it is, where it is reached, and its part in
    the Raft group ("voter" or "observer")."""

    node_id: str
    raft_address: str
    grpc_address: str
    peer_address: str
    role: str = "voter"


def join_proof(secret: str, nonce: str, claim: JoinClaim) -> str:
    message = "|".join(
        (
            "join",
            nonce,
            claim.node_id,
            claim.raft_address,
            claim.grpc_address,
            claim.peer_address,
            claim.role,
        )
    )
    return hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()


class JoinChallenges:
    def __init__(
        self,
        ttl_s: float = CHALLENGE_TTL_S,
        capacity: int = MAX_CHALLENGES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self._capacity = capacity
        self._clock = clock
        self._expiry: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def issue(self) -> str:
        nonce = secrets.token_hex(16)
        now = self._clock()
        with self._lock:
            self._drop_expired(now)
            while len(self._expiry) >= self._capacity:
                self._expiry.popitem(last=False)
            self._expiry[nonce] = now + self.ttl_s
        return nonce

    def redeem(self, nonce: str) -> bool:
        """Whether `nonce` was issued here, unused and unexpired; it is used
        up either way."""
        with self._lock:
            expiry = self._expiry.pop(nonce, None)
        return expiry is not None and self._clock() < expiry

    def _drop_expired(self, now: float) -> None:
        while self._expiry:
            nonce, expiry = next(iter(self._expiry.items()))
            if expiry > now:
                return
            del self._expiry[nonce]

    def __len__(self) -> int:
        with self._lock:
            return len(self._expiry)


class JoinAdmission:
    """The joining node's way in, on the node it joins through."""

    def __init__(
        self,
        secret: str,
        group: RaftGroup,
        proposer: Proposer,
        challenges: JoinChallenges | None = None,
    ) -> None:
        self._secret = secret
        self._group = group
        self._proposer = proposer
        self.challenges = challenges or JoinChallenges()

    def challenge(self) -> tuple[str, float]:
        """A nonce for one join attempt through this node, and how long it lasts."""
        return self.challenges.issue(), self.challenges.ttl_s

    def admit(self, claim: JoinClaim, nonce: str, proof: str) -> list[str]:
        """Adds a node to the Raft group once it proves it holds the secret,
        over a nonce this node issued (each nonce answers one attempt), and
        returns the voters' Raft addresses. An observer is not added: it gets
        the voters' addresses to connect to."""
        if not nonce or not self.challenges.redeem(nonce):
            raise Unauthenticated(
                "join refused: its challenge was not issued by this node, is used up or has "
                "expired (a replayed join?); ask JoinChallenge for a new one"
            )
        expected = join_proof(self._secret, nonce, claim)
        if not proof or not hmac.compare_digest(expected, proof):
            raise Unauthenticated("join refused: the node does not hold this cluster's secret")
        if claim.role not in ("voter", "observer"):
            raise InvalidArgument(f"join refused: role {claim.role!r} is not voter or observer")
        members = self._group.members
        if claim.role == "observer":
            # Not a member: it dials the voters and the leader replicates to it.
            return members
        raft_address = claim.raft_address
        if raft_address in members:
            return members
        self._proposer.check_writable()
        outcome: dict[str, Any] = {}

        def done(result: Any, error: int) -> None:
            outcome["error"] = error

        self._group.addNodeToCluster(raft_address, callback=done)
        # A one-node cluster cannot commit the change until the new node runs,
        # so wait only briefly for an outright refusal.
        deadline = time.monotonic() + 1.0
        while "error" not in outcome and time.monotonic() < deadline:
            time.sleep(0.02)
        if outcome.get("error") not in (None, 0):
            raise Unavailable(
                f"the leader refused to add {raft_address} (code {outcome['error']}); retry"
            )
        return sorted({*members, raft_address})
