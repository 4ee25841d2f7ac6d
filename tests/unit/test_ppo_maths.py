"""Exact tests of PPO's maths (npsco.ppo.maths, npsco.ppo.rollout): GAE with episode ends, the losses (in torch, as the
tests' oracle has them: tests/oracles/torch_learner.py), advantage normalisation, explained variance, reward scaling,
and the rollout's bootstrap values on truncated vs terminated steps."""

import math

import numpy as np
import pytest
import torch

from npsco.policy import mlp_forward
from npsco.ppo.config import preset
from npsco.ppo.maths import compute_gae, explained_variance
from npsco.ppo.rollout import RewardScaler
from npsco.ppo.trainer import Trainer
from oracles.torch_learner import normalize_advantages, policy_loss, value_loss


# --------------------------------------------------------------------------------------------------------------- GAE
def gae_loop(rewards, values, next_values, terminated, done, gamma, lam):
    """Textbook GAE, one env and one step at a time."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        following = 0.0  # A_{t+1} of the same episode
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, n] else next_values[t, n]
            delta = rewards[t, n] + gamma * bootstrap - values[t, n]
            following = delta if done[t, n] else delta + gamma * lam * following
            adv[t, n] = following
    return adv, adv + values


def random_rollout(T=40, N=3, seed=0):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    values = rng.normal(size=(T, N)).astype(np.float32)
    next_values = rng.normal(size=(T, N)).astype(np.float32)
    terminated = rng.random((T, N)) < 0.1
    truncated = (rng.random((T, N)) < 0.1) & ~terminated
    truncated[5, 0] = True  # at least one of each kind
    terminated[7, 1] = True
    truncated[7, 1] = False
    return rewards, values, next_values, terminated, terminated | truncated


@pytest.mark.parametrize(("gamma", "lam"), [(0.99, 0.95), (0.9, 1.0), (1.0, 0.0), (0.5, 0.5)])
def test_gae_matches_a_per_step_loop_with_episode_ends(gamma, lam):
    rewards, values, next_values, terminated, done = random_rollout()
    adv, ret = compute_gae(rewards, values, next_values, terminated, done, gamma, lam)
    ref_adv, ref_ret = gae_loop(rewards, values, next_values, terminated, done, gamma, lam)
    assert adv.shape == ret.shape == rewards.shape
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, ref_ret, rtol=1e-5, atol=1e-5)


def test_gae_on_a_hand_computed_example():
    # gamma = lambda = 0.5, no episode end:
    # deltas = [1 + .5*1 - .5, 2 + .5*1.5 - 1, 3 + .5*2 - 1.5] = [1, 1.75, 2.5]
    # A_2 = 2.5, A_1 = 1.75 + .25*2.5 = 2.375, A_0 = 1 + .25*2.375 = 1.59375
    rewards = np.array([[1.0], [2.0], [3.0]], np.float32)
    values = np.array([[0.5], [1.0], [1.5]], np.float32)
    next_values = np.array([[1.0], [1.5], [2.0]], np.float32)
    no = np.zeros((3, 1), bool)
    adv, ret = compute_gae(rewards, values, next_values, no, no, 0.5, 0.5)
    np.testing.assert_array_equal(adv[:, 0], [1.59375, 2.375, 2.5])
    np.testing.assert_array_equal(ret[:, 0], [2.09375, 3.375, 4.0])


def test_truncation_bootstraps_from_next_values_and_termination_does_not():
    # env 0 is truncated at step 0, env 1 terminated at step 0; both start a new episode at step 1.
    rewards = np.array([[1.0, 1.0], [5.0, 5.0]], np.float32)
    values = np.array([[0.5, 0.5], [2.0, 2.0]], np.float32)
    next_values = np.array([[3.0, 3.0], [4.0, 4.0]], np.float32)  # [0] = V(final observation)
    terminated = np.array([[False, True], [False, False]])
    done = np.array([[True, True], [False, False]])
    adv, _ = compute_gae(rewards, values, next_values, terminated, done, 0.9, 0.8)
    assert adv[0, 0] == pytest.approx(1.0 + 0.9 * 3.0 - 0.5)  # bootstrapped from the final observation's value
    assert adv[0, 1] == pytest.approx(1.0 - 0.5)  # no bootstrap after a termination
    np.testing.assert_allclose(adv[1], [5.0 + 0.9 * 4.0 - 2.0] * 2, rtol=1e-6)


def test_both_episode_ends_cut_the_recursion_and_a_terminal_next_value_is_ignored():
    rewards, values, next_values, terminated, done = random_rollout(T=12, N=2, seed=1)
    terminated[:], done[:] = False, False
    terminated[4, 0] = done[4, 0] = True  # env 0 terminates at step 4
    done[4, 1] = True  # env 1 is truncated at step 4
    adv, _ = compute_gae(rewards, values, next_values, terminated, done, 0.99, 0.95)

    later = rewards.copy()
    later[5:] += 100.0  # rewards of the next episodes
    adv_later, _ = compute_gae(later, values, next_values, terminated, done, 0.99, 0.95)
    np.testing.assert_array_equal(adv_later[:5], adv[:5])
    assert not np.allclose(adv_later[5:], adv[5:])

    other = next_values.copy()
    other[4, 0] += 100.0  # V after a termination is never used
    adv_other, _ = compute_gae(rewards, values, other, terminated, done, 0.99, 0.95)
    np.testing.assert_array_equal(adv_other, adv)

    other = next_values.copy()
    other[4, 1] += 100.0  # V(final observation) after a truncation is used
    adv_other, _ = compute_gae(rewards, values, other, terminated, done, 0.99, 0.95)
    assert adv_other[4, 1] == pytest.approx(adv[4, 1] + 99.0, rel=1e-5)


# ------------------------------------------------------------------------------------------------------------ losses
def t64(values):
    return torch.tensor(values, dtype=torch.float64)


def test_policy_loss_clipped_and_unclipped_branches_on_exact_numbers():
    ratio = t64([0.5, 1.0, 1.5, 0.5])
    adv = t64([1.0, -1.0, 1.0, -1.0])
    old = t64([-1.0, -2.0, -0.5, 0.3])
    new = (old + ratio.log()).requires_grad_()
    loss, info = policy_loss(new, old, adv, clip_coef=0.2)
    # per sample max(-A r, -A clip(r)): [max(-.5, -.8), max(1, 1), max(-1.5, -1.2), max(.5, .8)] = [-.5, 1, -1.2, .8]
    assert loss.item() == pytest.approx((-0.5 + 1.0 - 1.2 + 0.8) / 4)
    kl = ((ratio - 1) - ratio.log()).mean().item()  # [0.19315, 0, 0.09453, 0.19315] / 4
    assert info["approx_kl"].item() == pytest.approx(kl)
    assert info["approx_kl"].item() == pytest.approx(0.120207, abs=1e-6)
    assert info["clipfrac"].item() == 0.75
    # the clipped samples (2 and 3) pass no gradient; the others pass -A * r / n
    loss.backward()
    np.testing.assert_allclose(new.grad.numpy(), [-0.5 / 4, 1.0 / 4, 0.0, 0.0], atol=1e-12)


def test_policy_loss_at_ratio_one_is_minus_the_mean_advantage():
    logp = t64([-1.0, -2.0, -3.0])
    adv = t64([1.0, 2.0, -6.0])
    loss, info = policy_loss(logp, logp, adv, 0.2)
    assert loss.item() == pytest.approx(1.0)
    assert info["approx_kl"].item() == 0.0 and info["clipfrac"].item() == 0.0


def test_value_loss_unclipped_is_half_the_mean_squared_error():
    new, old, ret = t64([1.0, 2.0, 3.0]), t64([1.5, 1.5, 1.5]), t64([0.0, 0.0, 4.0])
    assert value_loss(new, old, ret, 0.2, clip=False).item() == pytest.approx(0.5 * (1 + 4 + 1) / 3)


def test_value_loss_clipped_takes_the_larger_error_per_sample():
    new, old, ret = t64([1.0, 2.0, 3.0]), t64([1.5, 1.5, 1.5]), t64([0.0, 0.0, 4.0])
    # clipped values = old + clamp(new - old, +-0.2) = [1.3, 1.7, 1.7]: errors [1.69, 2.89, 5.29] vs plain [1, 4, 1]
    assert value_loss(new, old, ret, 0.2, clip=True).item() == pytest.approx(0.5 * (1.69 + 4.0 + 5.29) / 3)
    # inside the clip range both losses agree
    near = t64([1.4, 1.6, 1.55])
    assert value_loss(near, old, ret, 0.2, clip=True).item() == pytest.approx(
        value_loss(near, old, ret, 0.2, False).item()
    )


def test_normalize_advantages_exact_and_zero_mean_unit_std():
    out = normalize_advantages(t64([1.0, 2.0, 3.0, 4.0]))
    std = math.sqrt(5 / 3)  # unbiased std, as torch.std
    np.testing.assert_allclose(out.numpy(), [-1.5 / std, -0.5 / std, 0.5 / std, 1.5 / std], rtol=1e-7)
    out = normalize_advantages(torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 7 + 3)
    assert abs(out.mean().item()) < 1e-6 and out.std().item() == pytest.approx(1.0, abs=1e-6)
    assert torch.isfinite(normalize_advantages(torch.ones(8))).all()  # constant advantages: zeros, no NaN


def test_explained_variance():
    ret = np.array([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(ret, ret) == 1.0
    assert explained_variance(np.zeros(4), ret) == pytest.approx(0.0)
    # residual [0, 0, 0, -1]: var 0.1875; var(returns) 1.25
    assert explained_variance(np.array([1.0, 2.0, 3.0, 5.0]), ret) == pytest.approx(1 - 0.1875 / 1.25)
    assert math.isnan(explained_variance(np.arange(3.0), np.full(3, 2.0)))


# ------------------------------------------------------------------------------------------------- reward scaling
def reference_scaling(rewards, dones, gamma, clip, eps=1e-8):
    """NormalizeReward's logic, then clipping (CleanRL's reward wrappers): divide each reward by the std of the running
    discounted return of its env (running mean/var over all envs' returns, prior mean 0, var 1, count 1e-4, batched
    update); the running return restarts after an episode end.

    (Gymnasium 1.x's own wrapper differs in one detail: on a *terminating* step it multiplies the past return by
    (1 - terminated) before adding the reward, so that step's return forgets the episode's history. npsco, like
    gym <= 0.24 and CleanRL, keeps it; the statistics differ only marginally.)"""
    mean, var, count = 0.0, 1.0, 1e-4
    acc = np.zeros(rewards.shape[1])
    out = np.zeros_like(rewards, dtype=np.float64)
    for t in range(rewards.shape[0]):
        acc = acc * gamma + rewards[t]
        b_mean, b_var, n = acc.mean(), acc.var(), acc.size
        delta, total = b_mean - mean, count + n
        mean, var = mean + delta * n / total, (var * count + b_var * n + delta**2 * count * n / total) / total
        count = total
        out[t] = np.clip(rewards[t] / np.sqrt(var + eps), -clip, clip)
        acc[dones[t]] = 0.0
    return out


@pytest.mark.parametrize("num_envs", [1, 3])
def test_reward_scaler_matches_the_reference_computation(num_envs):
    rng = np.random.default_rng(0)
    rewards = rng.normal(2.0, 3.0, size=(30, num_envs))
    dones = rng.random((30, num_envs)) < 0.15
    scaler = RewardScaler(num_envs, gamma=0.9, clip=10.0)
    got = np.stack([scaler(rewards[t], dones[t]) for t in range(30)])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, reference_scaling(rewards, dones, 0.9, 10.0), rtol=1e-5)


def test_reward_scaler_clips_the_scaled_rewards():
    scaler = RewardScaler(1, gamma=0.99, clip=0.5)
    for _ in range(5):
        scaler(np.array([1e-3]), np.array([False]))
    assert scaler(np.array([1e3]), np.array([False]))[0] == 0.5
    assert scaler(np.array([-1e6]), np.array([False]))[0] == -0.5


def test_reward_scaler_resets_the_running_return_at_episode_ends():
    scaler = RewardScaler(2, gamma=0.5, clip=10.0)
    scaler(np.array([4.0, 4.0]), np.array([True, False]))
    # env 0's running return restarts after its episode end; env 1's goes on (4, then 0.5 * 4 + 1)
    np.testing.assert_array_equal(scaler.returns, [0.0, 4.0])
    scaler(np.array([1.0, 1.0]), np.array([False, False]))
    np.testing.assert_array_equal(scaler.returns, [1.0, 3.0])


def test_reward_scaler_disabled_is_the_identity():
    scaler = RewardScaler(3, gamma=0.99, clip=1.0, enabled=False)
    rewards = np.array([5.0, -20.0, 0.25])
    for _ in range(3):
        out = scaler(rewards, np.array([True, False, False]))
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, rewards.astype(np.float32))  # not even clipped


# ------------------------------------------------------------------------------------- the rollout's bootstrap values
def test_rollout_next_values_bootstrap_truncations_from_the_final_observation():
    """In a real maze rollout, next_values is V(s_{t+1}) inside an episode, V(final observation) on truncation and 0
    on termination (observation normalisation off, so the critic can be evaluated afterwards on raw observations)."""
    cfg = preset("npsco/FourRewardMaze-v0")
    cfg.num_envs, cfg.num_steps, cfg.num_minibatches, cfg.max_episode_steps, cfg.norm_obs = 4, 24, 4, 5, False
    trainer = Trainer(cfg, tensorboard=False)
    finals, env_truncated = [], []
    step = trainer.envs.step

    def recording_step(actions):
        out = step(actions)
        finals.append(np.array(out[4]["final_obs"], np.float32))
        env_truncated.append(np.array(out[3]))
        return out

    trainer.envs.step = recording_step
    try:
        buf = trainer.collect_rollout()
        last_obs = trainer.next_obs
    finally:
        trainer.envs.close()
    _, _, critics = trainer.agent.numpy_views()
    values, next_values = buf.values["task"], buf.next_values["task"]
    terminated, done = buf.terminated, buf.done
    truncated = np.stack(env_truncated)  # as the env reported it (a step can be both terminated and truncated)
    assert (truncated & ~terminated).any() and (terminated & ~truncated).any()

    np.testing.assert_allclose(values, mlp_forward(critics["task"], buf.obs)[..., 0], rtol=1e-5, atol=1e-6)
    following = np.concatenate([values[1:], mlp_forward(critics["task"], last_obs)[None, :, 0]])
    np.testing.assert_allclose(next_values[~done], following[~done], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(next_values[terminated & ~truncated], 0.0)  # unused: compute_gae ignores it
    t_idx, n_idx = np.nonzero(truncated)
    final_values = mlp_forward(critics["task"], np.stack([finals[t][n] for t, n in zip(t_idx, n_idx, strict=True)]))[
        :, 0
    ]
    np.testing.assert_allclose(next_values[truncated], final_values, rtol=1e-5, atol=1e-6)
    # the final observation is not the next episode's first observation, whose value `following` holds
    assert not np.allclose(next_values[truncated], following[truncated])
