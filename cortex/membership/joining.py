"""Joining by challenge-response. A joining node first asks the node it
joins through for a nonce (random, kept in that node's memory for a short
time, good for one attempt), then proves the cluster secret with an HMAC
over the nonce, its node id and its addresses. A captured join is useless:
its nonce is spent, and a fresh nonce needs a fresh proof."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

CHALLENGE_TTL_S = 30.0
# Nonces outstanding at once; the oldest go first (a joining node answers
# its own within milliseconds, so a flood of requests only costs a retry).
MAX_CHALLENGES = 1024


@dataclass(frozen=True)
class JoinClaim:
    """Who a joining node says it is and where it is reached."""

    node_id: str
    raft_address: str
    grpc_address: str
    peer_address: str


def join_proof(secret: str, nonce: str, claim: JoinClaim) -> str:
    message = "|".join(
        ("join", nonce, claim.node_id, claim.raft_address, claim.grpc_address, claim.peer_address)
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
