"""`TimedProposer` times every entry the node proposes, whichever way it
was proposed: one at a time (`submit`), together for a loop (`submit_all`)
or waited for by a request handler (`propose`)."""

from __future__ import annotations

from cortex.http.timing import TimedProposer
from tests.unit.test_proposer_submit_all import Callback, StandInGroup, entries


def test_every_way_of_proposing_is_timed() -> None:
    observed: list[float] = []
    proposer = TimedProposer(StandInGroup(), observed.append, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        proposer.submit(entries(1)[0]).result(5)
        proposer.submit_all(entries(2)).result(5)
        proposer.propose(entries(3), timeout=5)
    finally:
        proposer.stop()
    assert len(observed) == 6
    assert all(seconds >= 0 for seconds in observed)


def test_entries_that_fail_are_not_timed() -> None:
    class RefusingGroup(StandInGroup):
        def propose_batch(self, data: bytes, callback: Callback) -> None:
            callback(None, 1)

    observed: list[float] = []
    proposer = TimedProposer(RefusingGroup(), observed.append, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        assert proposer.submit_all(entries(2)).exception(5) is not None
        proposer.submit(entries(1)[0]).exception(5)
    finally:
        proposer.stop()
    assert observed == []
