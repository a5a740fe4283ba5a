"""Admission of an observer on the node it joins through: the proof is
checked as for any node (its role included), the observer is not added to
the Raft group, and it gets the voters' Raft addresses to connect to."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cortex.errors import InvalidArgument, Unauthenticated
from cortex.membership.joining import JoinAdmission, JoinClaim, join_proof

SECRET = "observer-join-test-secret"
VOTERS = ["127.0.0.1:7100", "127.0.0.1:7101", "127.0.0.1:7102"]


class FakeGroup:
    def __init__(self) -> None:
        self.members = list(VOTERS)
        self.added: list[str] = []

    def addNodeToCluster(self, address: str, callback: Any) -> None:  # noqa: N802
        self.added.append(address)
        callback(None, 0)


class FakeProposer:
    def check_writable(self) -> None:
        pass


@pytest.fixture
def admission() -> tuple[JoinAdmission, FakeGroup]:
    group = FakeGroup()
    return JoinAdmission(SECRET, group, FakeProposer()), group  # type: ignore[arg-type]


OBSERVER = JoinClaim("o1", "", "127.0.0.1:7203", "127.0.0.1:7303", role="observer")


def test_an_observer_gets_the_voters_and_joins_nothing(
    admission: tuple[JoinAdmission, FakeGroup],
) -> None:
    joins, group = admission
    nonce, _ = joins.challenge()
    assert joins.admit(OBSERVER, nonce, join_proof(SECRET, nonce, OBSERVER)) == VOTERS
    assert group.added == []


def test_a_voter_is_still_added(admission: tuple[JoinAdmission, FakeGroup]) -> None:
    joins, group = admission
    voter = JoinClaim("v4", "127.0.0.1:7103", "127.0.0.1:7204", "127.0.0.1:7304")
    nonce, _ = joins.challenge()
    assert joins.admit(voter, nonce, join_proof(SECRET, nonce, voter)) == sorted(
        [*VOTERS, "127.0.0.1:7103"]
    )
    assert group.added == ["127.0.0.1:7103"]


def test_the_proof_covers_the_role(admission: tuple[JoinAdmission, FakeGroup]) -> None:
    joins, group = admission
    nonce, _ = joins.challenge()
    # A proof made for an observer does not admit a voter with the same addresses.
    as_voter = replace(OBSERVER, role="voter", raft_address="127.0.0.1:7199")
    proof = join_proof(SECRET, nonce, replace(OBSERVER, raft_address="127.0.0.1:7199"))
    with pytest.raises(Unauthenticated):
        joins.admit(as_voter, nonce, proof)
    assert group.added == []


def test_an_unknown_role_is_refused(admission: tuple[JoinAdmission, FakeGroup]) -> None:
    joins, group = admission
    claim = replace(OBSERVER, role="witness")
    nonce, _ = joins.challenge()
    with pytest.raises(InvalidArgument, match="witness"):
        joins.admit(claim, nonce, join_proof(SECRET, nonce, claim))
    assert group.added == []
