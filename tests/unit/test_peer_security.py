"""What keeps node-to-node traffic from being replayed or forged: the
heartbeat guard (boot id, sequence number, freshness window, on a clock the
test moves), the join challenge store (single use, short-lived, bounded),
the join proof and the peer credential."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cortex.api.auth import peer_token
from cortex.membership.freshness import HeartbeatGuard, StaleHeartbeat
from cortex.membership.joining import JoinChallenges, JoinClaim, join_proof

SECRET = "a-cluster-secret-of-some-length"
NOW_MS = 1_800_000_000_000


class Clock:
    """A clock the test moves: called, as the join challenges read it; a
    `cortex.steps.Clock` (`now` in milliseconds) for the heartbeat guard."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now / 1000

    def monotonic(self) -> float:
        return self.now / 1000


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW_MS)


@pytest.fixture
def guard(clock: Clock) -> HeartbeatGuard:
    return HeartbeatGuard(window_s=5.5, clock=clock)


# ------------------------------------------------------------ heartbeats


def test_each_report_of_a_boot_is_taken_once_in_order(guard: HeartbeatGuard) -> None:
    guard.admit("n2", "boot-a", 1, NOW_MS)
    guard.admit("n2", "boot-a", 2, NOW_MS + 500)
    for seq in (2, 1):
        with pytest.raises(StaleHeartbeat, match="not newer than number 2 already taken"):
            guard.admit("n2", "boot-a", seq, NOW_MS + 500)
    # A gap (reports lost on the way) is fine.
    guard.admit("n2", "boot-a", 7, NOW_MS + 600)
    # Senders are judged separately.
    guard.admit("n3", "boot-b", 1, NOW_MS)


def test_reports_outside_the_window_are_refused(guard: HeartbeatGuard, clock: Clock) -> None:
    with pytest.raises(StaleHeartbeat, match=r"is 5\.6s old \(taken within 5\.5s\)"):
        guard.admit("n2", "boot-a", 1, NOW_MS - 5_600)
    with pytest.raises(StaleHeartbeat, match="ahead of this node's clock"):
        guard.admit("n2", "boot-a", 1, NOW_MS + 5_600)
    # Right at the edges, in both directions (clock skew), they are taken.
    guard.admit("n2", "boot-a", 1, NOW_MS - 5_500)
    guard.admit("n3", "boot-b", 1, NOW_MS + 5_500)
    # A report that was fresh is refused once it is old, whatever its number.
    clock.now += 6_000
    with pytest.raises(StaleHeartbeat, match="old"):
        guard.admit("n2", "boot-a", 2, NOW_MS)


def test_a_receiver_that_remembers_nothing_still_refuses_an_old_capture(clock: Clock) -> None:
    captured = ("n2", "boot-a", 41, NOW_MS)
    HeartbeatGuard(5.5, clock).admit(*captured)
    clock.now += 60_000
    restarted = HeartbeatGuard(5.5, clock)
    with pytest.raises(StaleHeartbeat, match="60.0s old"):
        restarted.admit(*captured)


def test_a_new_boot_is_taken_fresh_and_the_old_one_cannot_come_back(
    guard: HeartbeatGuard, clock: Clock
) -> None:
    guard.admit("n2", "boot-a", 90, NOW_MS)
    clock.now += 1_000
    guard.admit("n2", "boot-b", 1, NOW_MS + 1_000)  # restarted: numbers start again
    guard.admit("n2", "boot-b", 2, NOW_MS + 1_500)
    # A report of the previous boot, captured and replayed within the window.
    with pytest.raises(StaleHeartbeat, match="was sent before the last one taken"):
        guard.admit("n2", "boot-a", 91, NOW_MS + 200)
    # A new boot with a stale time is refused like any stale report.
    with pytest.raises(StaleHeartbeat, match="old"):
        guard.admit("n2", "boot-c", 1, NOW_MS - 10_000)


def test_reports_without_boot_id_or_number_are_refused(guard: HeartbeatGuard) -> None:
    for boot, seq in (("", 1), ("boot-a", 0)):
        with pytest.raises(StaleHeartbeat, match="no boot id or sequence number"):
            guard.admit("n2", boot, seq, NOW_MS)


# ---------------------------------------------------------------- joins


def test_a_challenge_answers_one_attempt() -> None:
    challenges = JoinChallenges()
    nonce = challenges.issue()
    assert len(nonce) == 32 and nonce != challenges.issue()
    assert challenges.redeem(nonce)
    assert not challenges.redeem(nonce)
    assert not challenges.redeem("never-issued")


def test_a_challenge_expires() -> None:
    clock = Clock()
    challenges = JoinChallenges(ttl_s=30, clock=clock)
    early, late = challenges.issue(), challenges.issue()
    clock.now = 29.9
    assert challenges.redeem(early)
    clock.now = 30.0
    assert not challenges.redeem(late)
    # Expired ones are dropped as new ones are issued.
    challenges.issue()
    clock.now = 61
    challenges.issue()
    assert len(challenges) == 1


def test_outstanding_challenges_are_bounded_oldest_out() -> None:
    challenges = JoinChallenges(capacity=3)
    nonces = [challenges.issue() for _ in range(5)]
    assert len(challenges) == 3
    assert [challenges.redeem(n) for n in nonces] == [False, False, True, True, True]


def test_the_join_proof_binds_the_nonce_the_node_and_every_address() -> None:
    claim = JoinClaim("n4", "10.0.0.4:7100", "10.0.0.4:7200", "10.0.0.4:7300")
    proof = join_proof(SECRET, "nonce-1", claim)
    assert proof == join_proof(SECRET, "nonce-1", claim)
    changed = [
        join_proof(SECRET, "nonce-2", claim),
        join_proof("another-secret-of-some-length", "nonce-1", claim),
    ]
    for field in ("node_id", "raft_address", "grpc_address", "peer_address"):
        changed.append(join_proof(SECRET, "nonce-1", replace(claim, **{field: "10.0.0.9:1"})))
    assert proof not in changed and len(set(changed)) == len(changed)


def test_the_peer_credential_is_derived_from_the_secret_not_the_secret() -> None:
    token = peer_token(SECRET)
    assert token == peer_token(SECRET) and len(token) == 64
    assert SECRET not in token
    assert token != peer_token("another-secret-of-some-length")
