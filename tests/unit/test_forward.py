"""The compiled forward pass (`npsco.forward`): a row's action is the same bits alone or in any batch, close to numpy's
matrix products, and the same bits on every processor (a pinned value); episodes and distances built on it inherit
that (an episode's return does not depend on the episodes run beside it)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npsco.episodes import run_episodes
from npsco.forward import tanh
from npsco.novelty.references import ReferenceSet
from npsco.novelty.threshold import visited_episodes
from npsco.policy import Policy, load_policy, mlp_forward, space_metadata, squash

ROOT = Path(__file__).resolve().parents[2]
WALKER = ROOT / "benchmarks/results/novel_everywhere/confirm/Walker2d-v5/lagr-state-s70000/novel/lagrangian/k2"


def random_policy(
    seed: int,
    obs_dim: int = 5,
    hidden=(16, 16),
    action_dim: int = 3,
    activation: str = "tanh",
    output: str = "linear",
    norm_obs: bool = True,
) -> Policy:
    rng = np.random.default_rng(seed)
    sizes = [obs_dim, *hidden, action_dim]
    weights = [
        (rng.normal(0, 1.5 / np.sqrt(i), (o, i)).astype(np.float32), rng.normal(0, 0.3, o).astype(np.float32))
        for i, o in zip(sizes[:-1], sizes[1:], strict=True)
    ]
    low, high = -np.full(action_dim, 1.5, np.float32), np.full(action_dim, 1.5, np.float32)
    obs_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
    return Policy(
        weights=weights,
        log_std=np.full(action_dim, -0.5, np.float32),
        obs_mean=rng.normal(0, 2, obs_dim).astype(np.float32),
        obs_var=rng.uniform(0.5, 4, obs_dim).astype(np.float32),
        obs_clip=5.0,
        norm_obs=norm_obs,
        action_low=low,
        action_high=high,
        metadata={
            "env_id": "none",
            "observation_space": space_metadata(obs_space),
            "action_space": space_metadata(gym.spaces.Box(low, high, dtype=np.float32)),
        },
        activation=activation,
        output=output,
    )


def numpy_mean(policy: Policy, obs: np.ndarray) -> np.ndarray:
    """The former numpy path (BLAS matrix products, numpy's tanh), as the reference for closeness."""
    mean = mlp_forward(policy.weights, policy.normalize(obs), policy.activation)
    if policy.output == "tanh":
        mean = squash(mean, policy.action_low, policy.action_high)
    return np.clip(mean.astype(np.float32), policy.action_low, policy.action_high)


def test_tanh_is_within_one_ulp_of_numpy_odd_and_monotone():
    x = np.concatenate([np.linspace(-12, 12, 200_001), [0.0, 1e-30, 9.0, 9.011, 9.02, 40.0]]).astype(np.float32)
    got = np.array([np.float32(tanh(np.float64(v))) for v in x])
    ulp = np.spacing(np.abs(np.tanh(x)).astype(np.float32))
    assert (np.abs(got - np.tanh(x)) <= ulp).all()
    assert np.array_equal(got, -np.array([np.float32(tanh(np.float64(-v))) for v in x]))
    order = np.argsort(x, kind="stable")
    assert (np.diff(got[order]) >= 0).all()
    assert np.isnan(tanh(np.nan)) and tanh(np.inf) == 1.0 and tanh(-np.inf) == -1.0


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rows=st.integers(1, 70),
    depth=st.integers(0, 3),
    activation=st.sampled_from(["tanh", "relu"]),
    output=st.sampled_from(["linear", "tanh"]),
    norm_obs=st.booleans(),
)
def test_a_row_is_the_same_bits_alone_and_in_any_batch(seed, rows, depth, activation, output, norm_obs):
    policy = random_policy(seed, hidden=(7, 33, 64)[:depth], activation=activation, output=output, norm_obs=norm_obs)
    rng = np.random.default_rng(seed + 1)
    obs = rng.normal(0, 3, (rows, policy.obs_dim))
    batch = policy.mean_action(obs)
    alone = np.stack([policy.mean_action(o) for o in obs])
    assert batch.dtype == np.float32 and batch.shape == (rows, policy.action_dim)
    assert np.array_equal(batch, alone)
    shuffled = rng.permutation(rows)
    assert np.array_equal(policy.mean_action(obs[shuffled]), batch[shuffled])
    assert np.array_equal(policy.raw_mean(obs[:1]), policy.raw_mean(obs)[:1])
    np.testing.assert_allclose(batch, numpy_mean(policy, obs), rtol=1e-5, atol=2e-6)


def test_the_bits_are_pinned_on_every_processor():
    # IEEE operations in a fixed order, no fused multiply-add, no libm: any x86-64 processor gives these bits
    policy = random_policy(3, hidden=(64, 64), action_dim=6)
    obs = np.random.default_rng(4).normal(0, 3, (257, policy.obs_dim))
    actions = policy.mean_action(obs)
    assert hashlib.sha256(actions.tobytes()).hexdigest()[:16] == "ebb4254554171b6a"  # (measured on an AMD EPYC)


def test_changing_a_field_is_seen_and_replace_makes_a_fresh_policy():
    policy = random_policy(5)
    obs = np.random.default_rng(0).normal(0, 3, (4, policy.obs_dim))
    before = policy.mean_action(obs)
    policy.norm_obs = False
    assert not np.array_equal(policy.mean_action(obs), before)
    policy.norm_obs = True
    w, b = policy.weights[-1]
    doubled = dataclasses.replace(policy, weights=[*policy.weights[:-1], (w * 2, b)])
    assert not np.array_equal(doubled.mean_action(obs), before)
    assert np.array_equal(policy.mean_action(obs), before)


def test_observations_of_the_wrong_shape_are_refused():
    policy = random_policy(6)
    with pytest.raises(ValueError, match="the policy takes"):
        policy.mean_action(np.zeros(policy.obs_dim + 1))
    with pytest.raises(ValueError, match="the policy takes"):
        policy.mean_action(np.zeros((2, 2, policy.obs_dim)))


def test_an_episode_returns_the_same_alone_in_a_batch_and_in_a_plain_gymnasium_loop():
    # the case: the confirmation's Walker2d lagr-state k2, episode 0 of seed 0, whole (1,000 steps); batched
    # BLAS products gave it 4452.6 alone and 4307.1 beside two other episodes
    policy = load_policy(WALKER)
    alone = run_episodes(policy, 1, seed=0)
    beside = run_episodes(policy, 3, seed=0)
    assert alone.returns[0] == beside.returns[0] and alone.lengths[0] == beside.lengths[0]
    assert [run_episodes(policy, 1, seed=i).returns[0] for i in (1, 2)] == beside.returns[1:].tolist()

    env = gym.make("Walker2d-v5")
    obs, _ = env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy.mean_action(obs))
        total += float(reward)
        done = terminated or truncated
    env.close()
    assert total == beside.returns[0]


def test_a_thresholds_episodes_visit_the_same_states_alone_and_side_by_side():
    # r0 and a distance average per-state distances over the states of deterministic episodes: those states are the
    # same whether an episode runs alone or beside others, and so is each state's distance (the test below)
    policy = load_policy(WALKER)
    together = visited_episodes(policy, 3, seed=5, max_episode_steps=200)
    for i, states in enumerate(together):
        (alone,) = visited_episodes(policy, 1, seed=5 + i, max_episode_steps=200)
        assert np.array_equal(alone, states)


def test_an_exact_reference_set_gives_a_state_the_same_distance_alone_and_in_a_batch():
    refs = [random_policy(s, hidden=(32, 32)) for s in (10, 11, 12)]
    mine = random_policy(13, hidden=(32, 32))
    obs = np.random.default_rng(1).normal(0, 3, (50, mine.obs_dim))
    everyone = ReferenceSet(refs, exact=True)
    for metric, std in (("deterministic", None), ("wasserstein2", mine.action_std)):
        batch = everyone.distances(obs, mine.mean_action(obs), std, metric)
        alone = np.concatenate([everyone.distances(o[None], mine.mean_action(o[None]), std, metric) for o in obs])
        assert batch.shape == (50, 3) and np.array_equal(batch, alone)
        fast = ReferenceSet(refs).distances(obs, mine.mean_action(obs), std, metric)
        np.testing.assert_allclose(batch, fast, rtol=1e-5, atol=1e-5)
    assert np.array_equal(everyone.mean_actions(obs)[1], refs[1].mean_action(obs))
