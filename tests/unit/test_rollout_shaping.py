"""Novelty after the rollout (`Hooks.shape_rollout`, `NoveltyMethod.rollout_novelty`): the references evaluated on
all of a rollout's states at once give the running novelty that step-by-step evaluation gives (to float32 rounding),
episode ends and the episodes that carry into the next rollout included; and the reward scaler sees the shaped
rewards in step order."""

from __future__ import annotations

import numpy as np
import pytest

from npsco.methods import make_method
from npsco.methods.base import MethodContext
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import NoveltyTracker, ReferenceSet
from npsco.ppo.trainer import Trainer
from npsco.tasks import MAZE_ID


@pytest.mark.parametrize("discount", [1.0, 0.9])
def test_the_whole_rollouts_novelty_equals_the_step_by_steps(discount, tiny_maze, maze_policies):
    refs = ReferenceSet([maze_policies.const([0.4, 0.1]), maze_policies.step()], ["a", "b"])
    method = make_method(MethodConfig.of("wsr", novelty_discount=discount), MethodContext(MAZE_ID, refs, 0.3))
    trainer = Trainer(tiny_maze(num_envs=4, num_steps=64, total_timesteps=3 * 256), method, tensorboard=False)
    seen = []
    original = method.rollout_novelty

    def record(steps):
        d, u, actions = original(steps)
        seen.append((steps, u))
        return d, u, actions

    method.rollout_novelty = record
    for _ in range(3):  # episodes carry from one rollout into the next
        trainer.collect_rollout()
    tracker = NoveltyTracker(refs, 4, discount=discount)
    ended = 0
    for steps, u in seen:
        for t in range(u.shape[0]):
            _, expected = tracker.update(steps.obs[t], steps.mean_action[t])
            np.testing.assert_allclose(u[t], expected, rtol=1e-6, atol=1e-7)
            tracker.reset(steps.done[t])
            ended += int(steps.done[t].sum())
    assert ended > 4  # episodes ended inside the rollouts


def test_shaped_rewards_reach_the_scaler_in_step_order(tiny_maze, maze_policies):
    refs = ReferenceSet([maze_policies.const([0.4, 0.1])])
    cfg = tiny_maze(num_envs=2, num_steps=32, scale_reward=True)
    method = make_method(MethodConfig.of("wsr", wsr_weight=2.0), MethodContext(MAZE_ID, refs, 0.3))
    trainer = Trainer(cfg, method, tensorboard=False)
    calls = []
    scaler = trainer.reward_scaler.__call__
    trainer.reward_scaler = lambda rewards, done: calls.append(np.array(rewards)) or scaler(rewards, done)
    buf = trainer.collect_rollout()
    assert len(calls) == 32 and buf.rewards["task"].shape == (32, 2)
    assert method._bonus_n == 64 and np.isfinite(buf.rewards["task"]).all()
