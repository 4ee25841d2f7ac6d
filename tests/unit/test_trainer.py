"""The trainer's own bookkeeping: what it builds once, what once per iteration."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Box

from npsco.errors import NpscoError
from npsco.methods.base import Method
from npsco.ppo.agent import ActorCritic
from npsco.ppo.config import PPOConfig
from npsco.ppo.trainer import Trainer


def test_training_snapshots_the_policy_once_per_iteration_and_reads_the_settings_once(monkeypatch, tiny_maze):
    snapshots, settings = [], []
    to_policy = ActorCritic.to_policy
    monkeypatch.setattr(ActorCritic, "to_policy", lambda self, *a: snapshots.append(1) or to_policy(self, *a))

    class Counted(Method):
        def metadata(self):
            settings.append(1)
            return {"knob": 1}

    cfg = tiny_maze(total_timesteps=3 * 64, eval_every=1, eval_episodes=2, actor_hidden=(8,), critic_hidden=(8,))
    result = Trainer(cfg, Counted(), tensorboard=False).train(progress=False)
    assert len(result.eval_curve) == 3  # every iteration evaluated the policy it snapshot
    assert len(snapshots) == 1 + 3 and len(settings) == 1
    assert result.policy.metadata["method_config"] == {"knob": 1}
    assert result.policy.metadata["training"] == {"global_step": 3 * 64, "iteration": 3}


class Spaces(gym.Env):
    """An env of given spaces (it is never stepped: the trainer refuses it first)."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, seed=None, options=None):
        return self.observation_space.sample(), {}


@pytest.mark.parametrize(
    "obs, act, message",
    [
        (Box(0.0, 1.0, (2, 2)), Box(-1.0, 1.0, (2,)), r"observations of shape \(2, 2\) are not supported"),
        (Box(0.0, 1.0, (2,)), Box(-1.0, np.inf, (2,)), "flat action vector with finite bounds"),
        (Box(0.0, 1.0, (2,)), gym.spaces.Discrete(3), "Discrete actions are not supported"),
    ],
)
def test_the_trainer_refuses_spaces_its_policies_cannot_act_in(obs, act, message):
    gym.register("npsco-test/Spaces-v0", entry_point=lambda render_mode=None: Spaces(obs, act))
    try:
        with pytest.raises(NpscoError, match=message):
            Trainer(PPOConfig(env_id="npsco-test/Spaces-v0", num_envs=2), tensorboard=False)
    finally:
        del gym.registry["npsco-test/Spaces-v0"]


def test_rollout_logprobs_are_the_policys_log_density_of_its_actions(tiny_maze):
    """The rollout computes log pi(a_t | s_t) after its loop, from the stored means: it is the agent's own
    log-density of the stored actions at the stored observations (the update's `evaluate`), and it changes with
    the actions."""
    import torch

    cfg = tiny_maze(total_timesteps=64, num_envs=2, num_steps=32, eval_every=0, actor_hidden=(8,), critic_hidden=(8,))
    trainer = Trainer(cfg, tensorboard=False)
    with torch.no_grad():
        trainer.agent.actor_logstd.fill_(-0.7)  # away from 0, so that the std's place in the formula matters
    buf = trainer.collect_rollout()
    obs, actions = torch.from_numpy(buf.obs.reshape(-1, buf.obs.shape[-1])), torch.from_numpy(buf.actions)
    with torch.no_grad():
        logprob, _, _ = trainer.agent.evaluate(obs, actions.reshape(-1, actions.shape[-1]))
        normal = trainer.agent.distribution(obs).log_prob(actions.reshape(-1, actions.shape[-1])).sum(-1)
    np.testing.assert_allclose(buf.logprobs.reshape(-1), logprob.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(buf.logprobs.reshape(-1), normal.numpy(), rtol=1e-5, atol=1e-5)
    assert np.unique(buf.logprobs).size > buf.logprobs.size // 2  # one per step, not one value broadcast


def test_rollout_values_are_each_states_critic_value(tiny_maze):
    """The rollout computes V(s_t) for all its steps in one batched call after the loop: each is the critic's value at
    the state the policy acted on at step t, in every stream (to float32 rounding: a batched product may round
    differently from one row's), and the bootstrap of a step inside an episode is the next step's value."""
    from npsco.policy import mlp_forward

    cfg = tiny_maze(total_timesteps=64, num_envs=2, num_steps=32, eval_every=0, actor_hidden=(8,), critic_hidden=(8,))
    trainer = Trainer(cfg, tensorboard=False)
    trainer.agent.add_critic("extra")
    trainer.streams = (*trainer.streams, "extra")
    buf = trainer.collect_rollout()
    _, _, critics = trainer.agent.numpy_views()
    for stream in ("task", "extra"):
        one_by_one = np.stack([mlp_forward(critics[stream], buf.obs[t])[:, 0] for t in range(32)])
        np.testing.assert_allclose(buf.values[stream], one_by_one, rtol=1e-5, atol=1e-6)
        inside = ~buf.done[:-1]
        np.testing.assert_array_equal(buf.next_values[stream][:-1][inside], buf.values[stream][1:][inside])
    assert not np.allclose(buf.values["task"], buf.values["extra"])  # two critics, two sets of values


# ------------------------------------------------------------------------------------- the evaluation cadence
@pytest.mark.parametrize(
    "eval_every, iterations, period",
    [
        (25, 488, 25),  # a 1M-step MuJoCo run (1 env x 2048 steps): the default, 19 evaluations and the final one
        (25, 732, 25),  # Walker2d's paper budget
        (10, 146, 10),  # the maze's default budget (150,000 steps of 1,024)
        (25, 29, 2),  # 60,000 MuJoCo steps: 14 evaluations instead of 1
        (25, 100, 10),
        (25, 10, 1),
        (3, 3, 1),  # fewer iterations than EVAL_POINTS: a point per iteration
        (25, 9, 1),  # 18,432 MuJoCo steps: 9 points, not 1
        (25, 1, 1),
        (0, 100, 0),  # no periodic evaluation
        (0, 3, 0),
    ],
)
def test_the_evaluation_period_shrinks_so_that_a_curve_has_at_least_10_points(eval_every, iterations, period):
    from npsco.ppo.config import EVAL_POINTS, eval_period

    assert eval_period(eval_every, iterations) == period
    if period:
        assert iterations // period >= min(EVAL_POINTS, iterations)


def test_a_short_budget_evaluates_10_times_and_trains_the_same_bits(tiny_maze):
    """12 iterations with eval_every 25: 12 evaluations (every iteration) where there was one, and the evaluations do
    not touch what training draws: the trained policy is bit for bit the one trained without evaluation."""
    cfg = tiny_maze(total_timesteps=12 * 64, eval_every=25, eval_episodes=2)
    assert (cfg.num_iterations, cfg.eval_period) == (12, 1)
    evaluated = Trainer(cfg, tensorboard=False).train(progress=False)
    plain = Trainer(PPOConfig(**{**cfg.__dict__, "eval_every": 0}), tensorboard=False).train(progress=False)
    assert [e["global_step"] for e in evaluated.eval_curve] == [64 * i for i in range(1, 13)]
    assert plain.eval_curve == []
    for (w1, b1), (w2, b2) in zip(evaluated.policy.weights, plain.policy.weights, strict=True):
        assert np.array_equal(w1, w2) and np.array_equal(b1, b2)
    assert np.array_equal(evaluated.policy.obs_mean, plain.policy.obs_mean)


def test_the_report_says_the_steps_between_evaluations_of_the_period_used():
    from npsco.report.build import eval_intervals

    def config(steps: int) -> dict:
        return {"ppo": {"eval_every": 25, "num_envs": 1, "num_steps": 2048, "total_timesteps": steps}}

    assert eval_intervals([config(1_000_000)]) == "51200"
    assert eval_intervals([config(60_000), config(1_000_000)]) == "4096 or 51200"
    assert eval_intervals([{"ppo": {"eval_every": "x"}}, {}]) == ""


def test_a_network_past_the_memory_limit_is_refused_before_it_is_allocated(tiny_maze):
    with pytest.raises(NpscoError, match=r"actor_hidden 65536,65536 makes a network of 4,295,229,441 parameters"):
        tiny_maze(actor_hidden=(65536, 65536)).validate()
    with pytest.raises(NpscoError, match=r"critic_hidden 8192,8192,8192 .* past npsco's limit of 67,108,864"):
        tiny_maze(critic_hidden=(8192, 8192, 8192)).validate()
    # with the task's sizes: 2 observations and 2 actions of the maze count too
    with pytest.raises(NpscoError, match=r"actor_hidden 8192,8188 makes a network of 67,125,238 parameters"):
        Trainer(tiny_maze(actor_hidden=(8192, 8188)), tensorboard=False)  # (validate passes it)
