"""The rollout's compiled steps (`npsco.ppo._rollout_kernels`, behind `RunningMeanStd.observe`, `RewardScaler` and
`Trainer.collect_rollout`) give the bits of the numpy code they replaced, written out here as the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from npsco.policy import OBS_NORM_EPS
from npsco.ppo._rollout_kernels import record_ends, sample_action, tally
from npsco.ppo.agent import RunningMeanStd
from npsco.ppo.maths import compute_gae
from npsco.ppo.rollout import RewardScaler


class RefRewardScaler:
    """`RewardScaler` as it was, in numpy."""

    def __init__(self, num_envs, gamma, clip):
        self.gamma, self.clip = gamma, clip
        self.returns = np.zeros(num_envs, np.float64)
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4

    def __call__(self, rewards, done):
        self.returns = self.returns * self.gamma + rewards
        n = self.returns.size
        if n > 1:
            bm = float(np.add.reduce(self.returns)) / n
            centred = self.returns - bm
            bv = float(np.add.reduce(centred * centred)) / n
        else:
            bm, bv = float(self.returns[0]), 0.0
        delta, total = bm - self.mean, self.count + n
        self.mean += delta * n / total
        self.var = (self.var * self.count + bv * n + delta**2 * self.count * n / total) / total
        self.count = total
        if done.any():
            self.returns[done] = 0.0
        scaled = rewards / math.sqrt(self.var + 1e-8)
        return np.minimum(np.maximum(scaled, -self.clip), self.clip).astype(np.float32)


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("num_envs", [1, 2, 16, 33])
def test_reward_scaler_matches_numpy(num_envs):
    rng = np.random.default_rng(num_envs)
    got, expected = RewardScaler(num_envs, 0.99, 10.0), RefRewardScaler(num_envs, 0.99, 10.0)
    for t in range(500):
        rewards = rng.normal(1.0, 3.0, num_envs) * (100.0 if t == 250 else 1.0)  # some clipped
        done = rng.random(num_envs) < 0.05
        out = np.empty(num_envs, np.float32)
        got(rewards, done, out=out)
        assert same(out, expected(rewards, done))
        assert same(got.returns, expected.returns)
        assert (got.mean, got.var, got.count) == (expected.mean, expected.var, expected.count)


def test_reward_scaler_squares_with_pow_as_python_does():
    """Python's `delta ** 2` is libm's pow, which differs from delta * delta in the last bit for some values: the
    kernel's variance follows pow (a kernel that multiplied would fail here)."""
    rng = np.random.default_rng(0)
    found = 0
    for x in rng.standard_normal(100_000) * 7.0:
        if x**2 == x * x:
            continue
        got, expected = RewardScaler(1, 0.9, 1e9), RefRewardScaler(1, 0.9, 1e9)
        got.count = expected.count = 1.0
        rewards, done = np.array([x]), np.array([False])
        out = got(rewards, done)
        expected_out = expected(rewards, done)
        multiplied = (1.0 * 1.0 + 0.0 * 1 + x * x * 1.0 * 1 / 2.0) / 2.0
        if multiplied == expected.var:
            continue  # the last bit rounded away
        found += 1
        assert got.var == expected.var and same(out, expected_out)
    assert found > 5


def test_running_mean_std_observe_matches_update_then_normalize():
    rng = np.random.default_rng(1)
    for n, d in [(1, 11), (1, 1), (2, 3), (16, 2), (16, 1), (33, 17)]:
        for enabled in (True, False):
            got, expected = RunningMeanStd((d,), 5.0, enabled), RunningMeanStd((d,), 5.0, enabled)
            for t in range(50):
                raw = (rng.standard_normal((n, d)) * 3.0 + t * 0.1).astype(np.float32)
                if t == 20:
                    raw[0, 0] = 1e6  # clipped
                out = np.empty((n, d), np.float32)
                got.observe(raw, out)
                expected.update(raw)
                assert same(out, expected.normalize(raw))
                assert same(got.mean, expected.mean) and same(got.var, expected.var) and got.count == expected.count
    assert OBS_NORM_EPS == 1e-8


def test_sample_action_and_tally_match_numpy():
    rng = np.random.default_rng(2)
    n, a = 4, 6
    mean, noise = rng.standard_normal((n, a)).astype(np.float32), rng.standard_normal((3, n, a)).astype(np.float32)
    std = np.exp(rng.standard_normal(a)).astype(np.float32)
    low, high = np.full(a, -1.0, np.float32), np.full(a, 1.0, np.float32)
    means, actions, env_actions = (np.zeros((3, n, a), np.float32) for _ in range(3))
    sample_action(mean, std, noise, low, high, 1, means, actions, env_actions)
    expected = (mean + std * noise[1]).astype(np.float32)
    assert same(actions[1], expected) and same(means[1], mean)
    assert same(env_actions[1], np.minimum(np.maximum(expected, low), high))
    assert 0 < np.count_nonzero(env_actions[1] != actions[1]) < n * a
    assert not actions[[0, 2]].any() and not means[[0, 2]].any() and not env_actions[[0, 2]].any()

    reward = rng.standard_normal(n)
    episode_return, episode_step = rng.standard_normal(n), np.arange(n, dtype=np.int64)
    expected_return, expected_step = episode_return + reward, episode_step + 1
    tally(reward, episode_return, episode_step)
    assert same(episode_return, expected_return) and same(episode_step, expected_step)


def test_record_ends():
    terminated = np.array([True, False, False, True])
    truncated = np.array([False, False, True, True])
    terminated_out, done_out = np.zeros(4, bool), np.zeros(4, bool)
    assert record_ends(terminated, truncated, terminated_out, done_out) == (True, True)
    assert same(terminated_out, terminated) and same(done_out, terminated | truncated)
    none = np.zeros(4, bool)
    assert record_ends(none, none, terminated_out, done_out) == (False, False)
    assert not done_out.any() and not terminated_out.any()
    assert record_ends(terminated, none, terminated_out, done_out) == (False, True)


def ref_gae(rewards, values, next_values, terminated, done, gamma, gae_lambda):
    """`compute_gae` as it was, in numpy."""
    advantages = np.zeros_like(rewards, dtype=np.float32)
    not_terminated = 1.0 - terminated.astype(np.float32)
    not_done = 1.0 - done.astype(np.float32)
    deltas = rewards + gamma * not_terminated * next_values - values
    last = np.zeros(rewards.shape[1:], dtype=np.float32)
    for t in reversed(range(rewards.shape[0])):
        last = deltas[t] + gamma * gae_lambda * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + values


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compute_gae_matches_numpy(dtype):
    rng = np.random.default_rng(3)
    for steps, envs in [(2048, 1), (64, 16), (7, 3)]:
        rewards, values, next_values = (rng.normal(size=(steps, envs)).astype(dtype) for _ in range(3))
        terminated = rng.random((steps, envs)) < 0.05
        done = terminated | (rng.random((steps, envs)) < 0.05)
        got = compute_gae(rewards, values, next_values, terminated, done, 0.995, 0.97)
        expected = ref_gae(rewards, values, next_values, terminated, done, 0.995, 0.97)
        assert same(got[0], expected[0]) and same(got[1], expected[1])
