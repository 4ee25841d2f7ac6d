"""Learning test: PPO with the maze's `default` preset finds the +10 (left) region from most starts, every update
computed by the numpy update (`NumpyLearner`, the default): the fast update does not hurt learning."""

import numpy as np
import pytest

from npsco.envs.maze import GOAL_NAMES
from npsco.episodes import run_episodes
from npsco.ppo.config import preset
from npsco.ppo.fast_update import NumpyLearner
from npsco.ppo.train import train
from npsco.tasks import MAZE_ID


@pytest.mark.slow
def test_ppo_learns_to_reach_the_left_goal_on_the_maze_with_the_numpy_update(monkeypatch):
    calls = []
    original = NumpyLearner.ppo_update
    monkeypatch.setattr(NumpyLearner, "ppo_update", lambda self, *a: calls.append(1) or original(self, *a))
    cfg = preset(MAZE_ID)  # 150k steps
    assert cfg.seed == 0 and cfg.total_timesteps == 150_000
    result = train(cfg, progress=False, tensorboard=False)
    assert len(calls) == cfg.num_iterations  # every update ran in numpy
    episodes = run_episodes(result.policy, 100, seed=12345)
    left = float(np.mean(episodes.goals == GOAL_NAMES.index("left")))
    summary = episodes.summary()
    assert left >= 0.7, summary
    assert episodes.returns.mean() >= 7.0, summary
