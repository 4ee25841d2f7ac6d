"""ReferenceSet (M frozen policies evaluated in one batched call) and NoveltyTracker (per-env running novelty).

Policies are built directly from small random numpy weights; the batched evaluation must equal evaluating each
`Policy.mean_action` on its own, whatever the mix of normalisers, action bounds and architectures."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npsco.errors import NpscoError
from npsco.novelty.metrics import deterministic_distance, wasserstein2_distance
from npsco.novelty.references import NoveltyTracker, ReferenceSet
from npsco.policy import Policy, space_metadata

OBS_DIM, ACT_DIM = 3, 2


def make_policy(
    seed: int,
    hidden=(8, 8),
    norm_obs: bool = True,
    bound: float = 1.0,
    obs_dim: int = OBS_DIM,
    act_dim: int = ACT_DIM,
    obs_clip: float = 5.0,
    obs_low: float = -np.inf,
) -> Policy:
    """A policy with random weights (big enough that some means fall outside the bounds) and its own normaliser."""
    rng = np.random.default_rng(seed)
    sizes = [obs_dim, *hidden, act_dim]
    weights = [
        (
            rng.normal(0.0, 0.9, (sizes[i + 1], sizes[i])).astype(np.float32),
            rng.normal(0.0, 0.5, sizes[i + 1]).astype(np.float32),
        )
        for i in range(len(sizes) - 1)
    ]
    obs_space = gym.spaces.Box(obs_low, np.inf, (obs_dim,), np.float32)
    act_space = gym.spaces.Box(-bound, bound, (act_dim,), np.float32)
    return Policy(
        weights=weights,
        log_std=rng.normal(-0.5, 0.3, act_dim).astype(np.float32),
        obs_mean=rng.normal(1.0, 2.0, obs_dim).astype(np.float32),
        obs_var=rng.uniform(0.5, 9.0, obs_dim).astype(np.float32),
        obs_clip=obs_clip,
        norm_obs=norm_obs,
        action_low=act_space.low,
        action_high=act_space.high,
        metadata={
            "env_id": "Test-v0",
            "observation_space": space_metadata(obs_space),
            "action_space": space_metadata(act_space),
        },
    )


def constant_policy(action, obs_dim: int = 2) -> Policy:
    """A one-layer policy whose mean action is `action` everywhere (zero weights, bias = action)."""
    action = np.asarray(action, np.float32)
    act_space = gym.spaces.Box(-1.0, 1.0, action.shape, np.float32)
    obs_space = gym.spaces.Box(0.0, 16.0, (obs_dim,), np.float32)
    return Policy(
        weights=[(np.zeros((action.size, obs_dim), np.float32), action)],
        log_std=np.zeros(action.size, np.float32),
        obs_mean=np.zeros(obs_dim, np.float32),
        obs_var=np.ones(obs_dim, np.float32),
        obs_clip=10.0,
        norm_obs=False,
        action_low=act_space.low,
        action_high=act_space.high,
        metadata={
            "env_id": "npsco/FourRewardMaze-v0",
            "observation_space": space_metadata(obs_space),
            "action_space": space_metadata(act_space),
        },
    )


def observations(n: int = 40, seed: int = 7, obs_dim: int = OBS_DIM) -> np.ndarray:
    # wide enough that some normalised observations hit the clip of 5
    return np.random.default_rng(seed).normal(1.0, 12.0, (n, obs_dim)).astype(np.float32)


def one_by_one(policies, obs):
    return np.stack([p.mean_action(obs) for p in policies])


# ----------------------------------------------------------------------------------------------- batched evaluation
def test_one_group_equals_each_policy_evaluated_alone():
    policies = [make_policy(s, norm_obs=s != 2, bound=0.5 + 0.5 * s, obs_clip=3.0 + s) for s in range(5)]
    refs = ReferenceSet(policies)
    assert len(refs._groups) == 1
    obs = observations()
    expected = one_by_one(policies, obs)
    got = refs.mean_actions(obs)
    assert got.shape == (5, 40, ACT_DIM)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # the test is not vacuous: clipping to bounds and normalisation both matter, and the policies disagree
    raw = np.stack([p.raw_mean(obs) for p in policies])
    assert (np.abs(raw) > np.stack([p.action_high for p in policies])[:, None]).any()
    assert np.abs(expected[0] - expected[1]).max() > 0.1


def test_the_folded_first_layer_and_the_exact_clipping_path_both_equal_each_policy_alone():
    """Observations no reference clips take the fast path (normalisers folded into one stacked first layer); any
    observation that some reference clips takes the exact normalise-and-clip path. Both equal the policies alone,
    also with normalisers far from zero mean (where a naive fold would lose float32 digits to cancellation)."""
    policies = [make_policy(s, obs_clip=10.0) for s in range(4)]
    for k, p in enumerate(policies):
        p.obs_mean = np.array([300.0, -250.0, 80.0], np.float32) + np.float32(0.1 * k)
        p.obs_var = np.full(OBS_DIM, 0.01 * (k + 1), np.float32)
    group = ReferenceSet(policies)._groups[0][1]
    inside = (np.array([300.2, -249.8, 80.2]) + np.random.default_rng(0).normal(0.0, 0.2, (30, OBS_DIM))).astype(
        np.float32
    )
    assert ((inside >= group.box_lo) & (inside <= group.box_hi)).all()
    outside = inside.copy()
    outside[3, 1] += 5.0  # one observation that every reference clips
    assert not ((outside >= group.box_lo) & (outside <= group.box_hi)).all()
    for obs in (inside, outside):
        np.testing.assert_allclose(
            ReferenceSet(policies).mean_actions(obs), one_by_one(policies, obs), rtol=1e-5, atol=2e-6
        )


def test_each_observation_batch_takes_the_path_its_box_check_says():
    """The box check (extra rows of the stacked first layer) sends a batch inside the box to the folded GEMM and any
    batch with one observation outside it to the exact path: spoiling the other path's parameters changes nothing."""
    policies = [make_policy(s, obs_clip=4.0) for s in range(3)]
    obs = np.stack([p.obs_mean for p in policies]).mean(0) + np.zeros((6, OBS_DIM), np.float32)
    expected = one_by_one(policies, obs)
    refs = ReferenceSet(policies)
    group = refs._groups[0][1]
    group.w1 = np.full_like(group.w1, np.nan)  # the exact path's first layer
    np.testing.assert_allclose(refs.mean_actions(obs), expected, rtol=1e-5, atol=1e-6)

    outside = obs.copy()
    outside[2, 0] = group.box_hi[0] + 1.0
    refs = ReferenceSet(policies)
    group = refs._groups[0][1]
    group.w1_stacked[: group.units] = np.nan  # the folded first layer (the box rows below it stay)
    np.testing.assert_allclose(refs.mean_actions(outside), one_by_one(policies, outside), rtol=1e-5, atol=1e-6)


def test_references_whose_normalisers_share_no_unclipped_observation_take_the_exact_path():
    policies = [make_policy(s, obs_clip=2.0) for s in range(2)]
    policies[1].obs_mean = policies[0].obs_mean + 100.0  # the boxes [mean +- 2 std] do not overlap
    refs = ReferenceSet(policies)
    assert refs._groups[0][1].box_empty
    obs = np.concatenate([np.broadcast_to(p.obs_mean, (3, OBS_DIM)) for p in policies]).astype(np.float32)
    np.testing.assert_allclose(refs.mean_actions(obs), one_by_one(policies, obs), rtol=1e-5, atol=1e-6)


def test_references_without_normalisation_have_no_box_and_always_take_the_folded_path():
    policies = [make_policy(s, norm_obs=False) for s in range(3)]
    group = ReferenceSet(policies)._groups[0][1]
    assert group.w1_stacked.shape[0] == group.units  # no box rows: nothing is ever clipped
    obs = observations(n=10) * 1e3
    np.testing.assert_allclose(
        ReferenceSet(policies).mean_actions(obs), one_by_one(policies, obs), rtol=1e-5, atol=1e-6
    )


def test_mixed_architectures_form_several_groups_and_keep_the_reference_order():
    hiddens = [(8, 8), (5,), (8, 8), (4, 4, 4), (5,), (6, 3)]
    policies = [make_policy(10 + i, hidden=h, norm_obs=i % 2 == 0, bound=1.0 + i) for i, h in enumerate(hiddens)]
    refs = ReferenceSet(policies, names=[f"p{i}" for i in range(6)])
    assert len(refs._groups) == 4
    assert sorted(np.concatenate([idx for idx, _ in refs._groups]).tolist()) == list(range(6))
    obs = observations(n=25, seed=3)
    np.testing.assert_allclose(refs.mean_actions(obs), one_by_one(policies, obs), rtol=1e-5, atol=1e-6)
    # one observation (N = 1) works too
    np.testing.assert_allclose(refs.mean_actions(obs[:1]), one_by_one(policies, obs[:1]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("activation", "output"), [("relu", "linear"), ("tanh", "tanh"), ("relu", "tanh")])
def test_imported_architectures_take_the_batched_path_and_equal_each_policy_alone(activation, output):
    # ReLU hidden layers and a tanh-squashed output (SB3's SAC, TD3): one stacked group; a batch inside the box takes
    # the folded first layer, a wide one the exact clipping path (the other path's first layer spoilt: unused)
    policies = [make_policy(30 + s, bound=0.5 + s, obs_clip=10.0 + s) for s in range(4)]
    for p in policies:
        p.activation, p.output = activation, output

    def spoilt(path: str) -> ReferenceSet:
        refs = ReferenceSet(policies)
        assert [type(group).__name__ for _, group in refs._groups] == ["_Group"]
        group = refs._groups[0][1]
        if path == "folded":
            group.w1 = np.full_like(group.w1, np.nan)
        else:
            group.w1_stacked[: group.units] = np.nan
        return refs

    group = ReferenceSet(policies)._groups[0][1]
    mid = (group.box_lo + group.box_hi) / 2
    inside = mid + 0.3 * (np.clip(observations(seed=5), group.box_lo, group.box_hi) - mid)
    wide = observations(seed=6)
    assert not ((wide >= group.box_lo) & (wide <= group.box_hi)).all()
    for path, obs in (("folded", inside), ("exact", wide)):
        # (each policy alone sums its layers in its own order, not BLAS's: float32 rounding, scaled by bounds up to 3.5)
        np.testing.assert_allclose(spoilt(path).mean_actions(obs), one_by_one(policies, obs), rtol=1e-5, atol=1e-5)
    assert np.ptp(one_by_one(policies, inside), axis=1).mean() > 0.1  # the actions vary with the state


def test_a_policy_without_normalisation_ignores_its_statistics():
    p = make_policy(4, norm_obs=False)
    obs = observations(n=6)
    got = ReferenceSet([p]).mean_actions(obs)[0]
    q = make_policy(4, norm_obs=False)
    q.obs_mean, q.obs_var = q.obs_mean + 100.0, q.obs_var * 50.0
    np.testing.assert_allclose(got, ReferenceSet([q]).mean_actions(obs)[0], rtol=0, atol=0)
    np.testing.assert_allclose(got, p.mean_action(obs), rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------------------------------------------------- distances
@pytest.fixture
def mixed():
    policies = [
        make_policy(20),
        make_policy(21, hidden=(5,)),
        make_policy(22, norm_obs=False),
        make_policy(23, hidden=(5,)),
    ]
    return policies, ReferenceSet(policies)


def test_deterministic_distances_equal_the_metric_function(mixed):
    policies, refs = mixed
    obs = observations(n=30, seed=11)
    action = np.random.default_rng(0).uniform(-1, 1, (30, ACT_DIM)).astype(np.float32)
    d = refs.distances(obs, action)
    assert d.shape == (30, 4)
    expected = np.stack([deterministic_distance(p.mean_action(obs), action) for p in policies], axis=1)
    np.testing.assert_allclose(d, expected, rtol=1e-5, atol=1e-6)
    assert d.min() >= 0 and d.std() > 0.1


def test_wasserstein2_distances_equal_the_metric_function(mixed):
    policies, refs = mixed
    obs = observations(n=30, seed=12)
    action = np.random.default_rng(1).uniform(-1, 1, (30, ACT_DIM)).astype(np.float32)
    std = np.array([0.3, 1.7], np.float32)
    d = refs.distances(obs, action, std=std, metric="wasserstein2")
    expected = np.stack(
        [
            wasserstein2_distance(
                p.mean_action(obs),
                np.broadcast_to(p.action_std, (30, ACT_DIM)),
                action,
                np.broadcast_to(std, (30, ACT_DIM)),
            )
            for p in policies
        ],
        axis=1,
    )
    np.testing.assert_allclose(d, expected, rtol=1e-5, atol=1e-6)
    # the std term is really there: W2 > the deterministic distance wherever the stds differ
    assert (d > refs.distances(obs, action) + 1e-3).all()


def test_distances_refuse_a_missing_std_and_an_unknown_metric(mixed):
    _, refs = mixed
    obs, action = observations(n=2), np.zeros((2, ACT_DIM), np.float32)
    with pytest.raises(ValueError, match="std"):
        refs.distances(obs, action, metric="wasserstein2")
    with pytest.raises(ValueError, match="unknown metric"):
        refs.distances(obs, action, metric="cosine")


# -------------------------------------------------------------------------------------------------- compatibility
def test_names_must_match_the_policies():
    with pytest.raises(ValueError):
        ReferenceSet([make_policy(0), make_policy(1)], names=["only-one"])


def test_a_reference_with_another_observation_space_is_refused_naming_both():
    refs = ReferenceSet([make_policy(0), make_policy(1, obs_dim=4)], names=["a", "b"])
    env_obs = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    env_act = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
    with pytest.raises(NpscoError) as e:
        refs.check_compatible(env_obs, env_act, "Test-v0")
    msg = str(e.value)
    assert "reference b" in msg and "observation space" in msg
    assert "Box(4,)" in msg and "Box(3,)" in msg and "Test-v0" in msg


def test_a_reference_with_other_observation_bounds_is_refused():
    refs = ReferenceSet([make_policy(0, obs_low=0.0)])
    with pytest.raises(NpscoError, match=r"observation space Box\(3,\) \[0, inf\].*Box\(3,\) \[-inf, inf\]"):
        refs.check_compatible(
            gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32), gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
        )


@pytest.mark.parametrize(
    "shape,bound,theirs", [((ACT_DIM,), 2.0, r"Box\(2,\) \[-2, 2\]"), ((3,), 1.0, r"Box\(3,\) \[-1, 1\]")]
)
def test_a_reference_with_another_action_space_is_refused_naming_both(shape, bound, theirs):
    refs = ReferenceSet([make_policy(0)], names=["r"])
    with pytest.raises(NpscoError, match=rf"reference r .*action space Box\(2,\) \[-1, 1\] but Env-v1 has {theirs}"):
        refs.check_compatible(
            gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32),
            gym.spaces.Box(-bound, bound, shape, np.float32),
            "Env-v1",
        )


def test_matching_spaces_are_accepted():
    refs = ReferenceSet([make_policy(0), make_policy(1, hidden=(5,))])
    refs.check_compatible(
        gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32), gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
    )


# ---------------------------------------------------------------------------------------------------- the tracker
def test_tracker_running_means_per_env_and_reset_per_env_exact_numbers():
    # three constant references in one dimension: c = 0, 0.5, -0.5, so d_j = |a - c_j| exactly
    refs = ReferenceSet(
        [constant_policy([0.0], obs_dim=2), constant_policy([0.5], obs_dim=2), constant_policy([-0.5], obs_dim=2)]
    )
    tracker = NoveltyTracker(refs, num_envs=2)
    obs = np.full((2, 2), 3.0, np.float32)

    d, u = tracker.update(obs, np.array([[0.5], [-0.25]], np.float32))
    np.testing.assert_array_equal(d, [[0.5, 0.0, 1.0], [0.25, 0.75, 0.25]])
    np.testing.assert_array_equal(u, [0.0, 0.25])

    d, u = tracker.update(obs, np.array([[0.0], [0.25]], np.float32))
    np.testing.assert_array_equal(d, [[0.0, 0.5, 0.5], [0.25, 0.25, 0.75]])
    np.testing.assert_array_equal(u, [0.25, 0.25])  # env0 means (0.25, 0.25, 0.75); env1 (0.25, 0.5, 0.5)

    tracker.reset(np.array([False, True]))  # env1's episode ended
    np.testing.assert_array_equal(tracker.counts, [2, 0])
    np.testing.assert_array_equal(tracker.sums[1], [0, 0, 0])  # (N, M): env 1's row

    d, u = tracker.update(obs, np.array([[-0.5], [0.75]], np.float32))
    np.testing.assert_array_equal(d, [[0.5, 1.0, 0.0], [0.75, 0.25, 1.25]])
    # env0: means (1/3, 1/2, 1/2) -> 1/3; env1 starts afresh: (0.75, 0.25, 1.25) -> 0.25 (0.4167 without the reset)
    np.testing.assert_allclose(u, [1.0 / 3.0, 0.25], rtol=1e-12)
    np.testing.assert_array_equal(tracker.counts, [3, 1])


def test_tracker_uses_the_wasserstein2_metric_with_the_new_policys_std():
    refs = ReferenceSet([constant_policy([0.0, 0.0])])  # log_std 0: std 1
    tracker = NoveltyTracker(refs, num_envs=1, metric="wasserstein2")
    _, u = tracker.update(
        np.zeros((1, 2), np.float32), np.array([[0.6, 0.0]], np.float32), std=np.array([1.0, 1.8], np.float32)
    )
    np.testing.assert_allclose(u, [1.0], rtol=1e-6)  # sqrt(0.6^2 + 0.8^2)


def test_tracker_refuses_no_references_and_unknown_metrics():
    with pytest.raises(NpscoError, match="at least one reference"):
        NoveltyTracker(ReferenceSet([]), num_envs=1)
    with pytest.raises(NpscoError, match="unknown novelty metric"):
        NoveltyTracker(ReferenceSet([constant_policy([0.0])]), num_envs=1, metric="kl")


def test_actions_and_distances_come_from_one_forward_pass_and_equal_the_separate_calls(maze_policies):
    refs = ReferenceSet([maze_policies.step(), maze_policies.const([0.3, -0.2])])
    obs = np.array([[3.0, 4.0], [12.0, 1.0], [8.5, 15.0]], np.float32)
    action = np.array([[0.1, 0.2], [-0.5, 0.0], [1.0, 1.0]], np.float32)
    actions, d = refs.actions_and_distances(obs, action)
    np.testing.assert_array_equal(actions, refs.mean_actions(obs))
    np.testing.assert_array_equal(d, refs.distances(obs, action))
    tracker = NoveltyTracker(refs, num_envs=3, keep_actions=True)
    tracker.update(obs, action)
    np.testing.assert_array_equal(tracker.reference_actions, actions)


# -------------------------------------------------------------------------------------- the tracker's compiled step
@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("output", ["linear", "tanh"])
@pytest.mark.parametrize("metric", ["deterministic", "wasserstein2"])
@pytest.mark.parametrize("discount", [1.0, 0.8])
def test_the_compiled_step_equals_the_numpy_path(activation, output, metric, discount):
    """Random references (some normalise, some clip the observations, means beyond the bounds; layers wider and
    narrower than their input, so both loops of the kernel run), 3 envs, 12 steps with episode ends between them and
    a NaN observation: the same d and u to float32 rounding. Each layer sums in another order than BLAS, the numpy
    path folds the normalisers into the first layer, the compiled one sums the distance in float64: measured, u
    differs by < 3e-7 relative and d by < 7e-6 (a small distance, whose subtraction cancels digits); the tolerance
    is rtol 1e-5 (~80 float32 ulps), atol 1e-6."""
    policies = [make_policy(40 + s, hidden=(8, 16), norm_obs=s != 1, bound=0.5 + s, obs_clip=2.0 + s) for s in range(4)]
    for p in policies:
        p.activation, p.output = activation, output
    refs = ReferenceSet(policies)
    fast = NoveltyTracker(refs, 3, metric, discount)
    slow = NoveltyTracker(refs, 3, metric, discount, compiled=False)
    assert fast._compiled_step is not None and slow._compiled_step is None
    rng = np.random.default_rng(0)
    std = np.array([0.3, 1.7], np.float32) if metric == "wasserstein2" else None
    clipped = False
    for t in range(12):
        obs = observations(n=3, seed=t)
        action = rng.uniform(-1.5, 1.5, (3, ACT_DIM)).astype(np.float32)
        clipped |= any((np.abs(obs - p.obs_mean) > p.obs_clip * np.sqrt(p.obs_var)).any() for p in policies[2:])
        if t == 5:
            obs[1, 2] = np.nan  # env 1's novelty is NaN from here to its episode's end, on both paths
        d_fast, u_fast = fast.update(obs, action, std)
        d_slow, u_slow = slow.update(obs, action, std)
        np.testing.assert_allclose(d_fast, d_slow, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(u_fast, u_slow, rtol=1e-5, atol=1e-6)
        assert np.isnan(u_fast[1]) == (5 <= t < 8)
        if t in (3, 7):  # episodes end
            for tracker in (fast, slow):
                tracker.reset(np.array([t == 3, True, False]))
    np.testing.assert_allclose(fast.sums, slow.sums, rtol=1e-5)
    np.testing.assert_allclose(fast.counts, slow.counts, rtol=1e-12)
    # not vacuous: the references disagree, and some observation was clipped by a normaliser
    assert np.ptp(d_slow, axis=1).min() > 0.05 and clipped


def test_the_compiled_step_runs_up_to_its_work_limit_for_one_architecture_without_kept_actions(monkeypatch):
    from npsco.novelty import references

    refs = ReferenceSet([make_policy(s) for s in range(3)])
    work = NoveltyTracker(refs, 1)._compiled_step.work
    assert work == 3 * (8 * (OBS_DIM + 1) + 8 * 9 + ACT_DIM * 9)  # multiply-adds of the 3 forward passes
    monkeypatch.setattr(references, "COMPILED_STEP_WORK", 4 * work)
    assert NoveltyTracker(refs, 4)._compiled_step is not None
    assert NoveltyTracker(refs, 5)._compiled_step is None  # numpy's matmuls beyond
    assert NoveltyTracker(refs, 4, compiled=False)._compiled_step is None
    assert NoveltyTracker(refs, 4, keep_actions=True)._compiled_step is None  # CPO's actions: the numpy path
    mixed = ReferenceSet([make_policy(0), make_policy(1, hidden=(5,))])  # two architectures: the numpy path
    assert NoveltyTracker(mixed, 1)._compiled_step is None


def test_the_compiled_step_refuses_arrays_of_the_wrong_size():
    tracker = NoveltyTracker(ReferenceSet([make_policy(0), make_policy(1)]), 2)
    with pytest.raises(ValueError, match="size is not the references'"):
        tracker.update(observations(n=2, obs_dim=OBS_DIM + 1), np.zeros((2, ACT_DIM), np.float32))
    with pytest.raises(ValueError, match="size is not the references'"):
        tracker.update(observations(n=2), np.zeros((2, ACT_DIM + 1), np.float32))
    tracker._sums = np.zeros((3, 2))  # a training state of another reference set
    with pytest.raises(ValueError, match="running sums"):
        tracker.update(observations(n=2), np.zeros((2, ACT_DIM), np.float32))


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 3),  # envs
    st.integers(1, 4),  # references
    st.integers(1, 40),  # steps per rollout
    st.floats(0.02, 0.6),  # the chance that a step ends its episode
    st.sampled_from([1.0, 0.9]),
    st.integers(0, 2**31 - 1),
)
def test_tracker_run_is_step_by_step_bit_for_bit(envs, refs_count, steps, end_rate, discount, seed):
    """`run`'s episode pieces give `run_steps`'s numbers bit for bit, across three rollouts (episodes carried from one
    to the next, ends on the first and last steps included), and leave the same running sums behind."""
    rng = np.random.default_rng(seed)
    refs = ReferenceSet([constant_policy([float(j)], obs_dim=2) for j in range(refs_count)])
    pieces, steps_ = (
        NoveltyTracker(refs, num_envs=envs, discount=discount),
        NoveltyTracker(refs, envs, discount=discount),
    )
    for _ in range(3):
        d = rng.exponential(1.0, (steps, envs, refs_count)) * rng.choice([1e-3, 1.0, 1e3])
        done = rng.random((steps, envs)) < end_rate
        done[rng.integers(steps), rng.integers(envs)] = True
        done[-1, 0] = rng.random() < 0.5
        u_pieces, u_steps = pieces.run(d, done), steps_.run_steps(d, done)
        assert u_pieces.tobytes() == u_steps.tobytes()
        assert pieces.sums.tobytes() == steps_.sums.tobytes() and pieces.counts.tobytes() == steps_.counts.tobytes()
