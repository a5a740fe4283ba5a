"""The resource sampler looks for running games at most every
GAMING_CHECK_S: a real process named like a game is found by the first look
after it starts, and forgotten by the first look after it ends."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cortex.membership.metrics import GAMING_CHECK_S, ResourceSampler

GAME = "cortexgame"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def game_binary(tmp_path: Path) -> Path:
    sleep = shutil.which("sleep")
    if sleep is None:
        pytest.skip("no sleep binary")
    binary = tmp_path / GAME
    shutil.copy(sleep, binary)
    return binary


def _sampler(tmp_path: Path, clock: Clock) -> ResourceSampler:
    return ResourceSampler(str(tmp_path), gaming_processes=(GAME,), probe_gpu=False, clock=clock)


def test_a_game_is_seen_by_the_first_look_after_it_starts(
    tmp_path: Path, game_binary: Path
) -> None:
    clock = Clock()
    sampler = _sampler(tmp_path, clock)
    assert sampler.sample().gaming_detected is False
    game = subprocess.Popen([str(game_binary), "60"])
    try:
        clock.now += 1.0
        assert sampler.sample().gaming_detected is False  # the last look holds
        clock.now += GAMING_CHECK_S
        assert sampler.sample().gaming_detected is True
    finally:
        game.kill()
        game.wait()
    clock.now += 1.0
    assert sampler.sample().gaming_detected is True  # until the next look
    clock.now += GAMING_CHECK_S
    assert sampler.sample().gaming_detected is False


def test_samples_between_looks_read_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    sampler = _sampler(tmp_path, clock)
    looks = []
    real = sampler._game_running
    monkeypatch.setattr(sampler, "_game_running", lambda: looks.append(clock.now) or real())
    for _ in range(20):
        sampler.sample()
        clock.now += 2.0  # the default heartbeat interval
    assert looks == [1000.0, 1000.0 + 2.0 * 15]
