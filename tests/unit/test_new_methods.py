"""The methods built to get past IPD's failure: the Lagrangian novelty constraint (its dual steps, its loss on the mean
actions and that loss's gradient, in numpy and through the torch update), reward switching (RSPO), and the state
distance (MMD with random Fourier features), each on exact numbers and properties."""

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from npsco.errors import NpscoError
from npsco.methods import make_method
from npsco.methods.base import MethodContext
from npsco.methods.lagrangian import Lagrangian, LagrangianTerm, distance_loss, dual_step, return_step
from npsco.methods.rspo import RSPO, intrinsic_reward, switched_reward
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.novelty.states import StateDistance, witness
from npsco.ppo.trainer import Trainer
from npsco.tasks import MAZE_ID
from oracles.torch_update import torch_update


# --------------------------------------------------------------------------------------------------- Lagrangian
def test_dual_step_on_exact_numbers():
    lam = np.array([0.0, 0.5, 1.0, 99.99])
    out = dual_step(lam, np.array([0.5, 1.5, 1.0, 0.0]), target=1.0, lr=0.1, cap=100.0)
    np.testing.assert_allclose(out, [0.05, 0.45, 1.0, 100.0])  # violated grows, satisfied shrinks, capped
    assert dual_step(np.array([0.01]), np.array([3.0]), 1.0, 0.1, 10.0)[0] == 0.0  # never below 0


def test_return_step_on_exact_numbers():
    assert return_step(0.0, 800.0, 1000.0, 0.9, 0.1) == pytest.approx(0.01)  # 0.1 * (900 - 800) / 1000
    assert return_step(0.05, 1000.0, 1000.0, 0.9, 0.1) == pytest.approx(0.04)
    assert return_step(0.0, 2000.0, 1000.0, 0.9, 0.1) == 0.0


def test_distance_loss_on_exact_numbers():
    mean = np.array([[0.0, 0.0], [3.0, 0.0]], np.float32)  # the second mean is clipped to 1 on its first action
    refs = np.array([[[1.0, 0.0]], [[1.0, 1.0]]], np.float32)  # (B, M=1, A)
    low, high = -np.ones(2, np.float32), np.ones(2, np.float32)
    loss, grad = distance_loss(mean, low, high, refs, np.array([2.0]), target=0.5)
    # distances 1 and 1 (the clipped mean (1, 0) is 1 from (1, 1)): L = -2 * mean(1, 1) / 0.5 = -4
    assert loss == pytest.approx(-4.0)
    # dL/dm_0 = -2 * (0 - 1, 0) / (1 * 2 * 0.5) = (2, 0); m_1's first action is clipped: no gradient there
    np.testing.assert_allclose(grad, [[2.0, 0.0], [0.0, 2.0]])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_distance_loss_gradient_is_the_autograd_one(seed):
    rng = np.random.default_rng(seed)
    B, M, A = 5, 3, 2
    mean = rng.uniform(-1.5, 1.5, (B, A)).astype(np.float32)
    refs = rng.uniform(-1, 1, (B, M, A)).astype(np.float32)
    weights = rng.uniform(0, 2, M)
    low, high = -np.ones(A, np.float32), np.ones(A, np.float32)
    loss, grad = distance_loss(mean, low, high, refs, weights, target=0.7)
    m = torch.tensor(mean, dtype=torch.float64, requires_grad=True)
    clipped = torch.clamp(m, -1.0, 1.0)
    dist = (clipped[:, None, :] - torch.tensor(refs, dtype=torch.float64)).norm(dim=-1)
    expected = -(dist.mean(0) * torch.tensor(weights)).sum() / 0.7
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    inside = (np.abs(mean) < 1.0).astype(np.float64)  # torch.clamp passes the gradient at its bounds; we do not
    np.testing.assert_allclose(grad, m.grad.numpy() * inside, rtol=1e-4, atol=1e-6)


@pytest.fixture
def lagrangian_trainer(tiny_maze, maze_policies):
    """`lagrangian_trainer(r0=0.5, **settings)`: a maze trainer (4 envs x 16 steps) with the Lagrangian method against
    two constant references."""

    def make(r0: float = 0.5, **settings) -> Trainer:
        refs = ReferenceSet([maze_policies.const([0.3, 0.0]), maze_policies.const([0.0, -0.2])], ["a", "b"])
        method = make_method(MethodConfig.of("lagrangian", **settings), MethodContext(MAZE_ID, refs, r0))
        cfg = tiny_maze(num_envs=4, num_steps=16, total_timesteps=64, num_minibatches=2)
        return Trainer(cfg, method, tensorboard=False)

    return make


def test_the_multipliers_start_at_zero_and_grow_only_while_violated(lagrangian_trainer):
    far = lagrangian_trainer(r0=1e-3)  # every distance is above a tiny target: the multipliers stay at 0
    metrics = far.hooks.update(far.learner, far.compute_advantages(far.collect_rollout()))
    assert metrics["lagrangian/lambda_sum"] == 0.0 and metrics["lagrangian/loss"] == 0.0
    near = lagrangian_trainer(r0=5.0)  # above any maze action distance: every constraint violated
    metrics = near.hooks.update(near.learner, near.compute_advantages(near.collect_rollout()))
    d = metrics["lagrangian/distance_min"]
    assert metrics["lagrangian/lambda_max"] == pytest.approx(0.1 * (5.5 - d) / 5.5, rel=1e-6)
    assert metrics["lagrangian/loss"] < 0 and len(near.hooks.multipliers) == 2


def test_nearest_keeps_one_multiplier_and_pushes_away_from_the_nearest_policy_only(lagrangian_trainer):
    tr = lagrangian_trainer(r0=5.0, lagrangian_multipliers="nearest")
    tr.hooks.update(tr.learner, tr.compute_advantages(tr.collect_rollout()))
    assert tr.hooks.multipliers.shape == (1,) and tr.hooks.multipliers[0] > 0


def method_update(tr: Trainer, batch) -> dict[str, float]:
    """The method's own update (numpy)."""
    return tr.hooks.update(tr.learner, batch)


def reference_update(tr: Trainer, batch) -> dict[str, float]:
    """The method's update with PPO's in torch (tests/oracles/)."""
    return torch_update(tr.hooks, tr.learner, batch)


@pytest.mark.parametrize("update", [method_update, reference_update], ids=["numpy", "torch"])
def test_the_term_moves_the_mean_away_from_the_avoided_policies(update, lagrangian_trainer):
    """With the PPO loss switched off (zero advantages, no value or entropy terms), an update follows the Lagrangian
    term alone: the batch's mean distance to the avoided policies grows (the method's update, and its torch
    reference)."""
    tr = lagrangian_trainer(r0=5.0)
    batch = tr.compute_advantages(tr.collect_rollout())
    batch.advantages["task"] = torch.zeros_like(batch.advantages["task"])
    ref_actions = tr.hooks.ref_actions.reshape(-1, 2, 2).copy()

    def mean_distance() -> float:
        with torch.no_grad():
            mean = np.clip(tr.agent.actor_mean(batch.obs).numpy(), -1, 1)
        return float(np.linalg.norm(mean[:, None] - ref_actions, axis=-1).mean())

    before = mean_distance()
    update(tr, batch)
    assert mean_distance() > before + 1e-3


def test_the_numpy_and_torch_updates_agree_with_the_term(lagrangian_trainer):
    results = []
    for update in (method_update, reference_update):
        tr = lagrangian_trainer(r0=5.0)
        update(tr, tr.compute_advantages(tr.collect_rollout()))
        results.append(torch.cat([p.detach().reshape(-1) for p in tr.agent.parameters()]).numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=2e-4, atol=2e-6)


def test_the_term_reads_the_avoided_actions_at_the_minibatchs_states():
    refs = np.arange(12, dtype=np.float32).reshape(3, 2, 2) / 10  # (B=3, M=2, A=2)
    term = LagrangianTerm(refs, np.array([1.0, 0.0]), 1.0, -np.ones(2, np.float32), np.ones(2, np.float32))
    loss, grad = term(np.array([2]), np.zeros((1, 2), np.float32))
    assert loss == pytest.approx(-np.linalg.norm(refs[2, 0]))
    np.testing.assert_allclose(grad[0], refs[2, 0] / np.linalg.norm(refs[2, 0]))


def test_lagrangian_settings_are_checked():
    for bad, message in (
        (dict(lagrangian_lr=0.0), "lagrangian_lr must be > 0"),
        (dict(lagrangian_multipliers="all"), "lagrangian_multipliers must be one of"),
        (dict(metric="wasserstein2"), "deterministic action distances or states"),
    ):
        with pytest.raises(NpscoError, match=message):
            MethodConfig.of("lagrangian", **bad).validate()


def test_the_return_constraint_needs_the_references_returns(maze_policies):
    refs = ReferenceSet([maze_policies.const([0.3, 0.0])])
    config = MethodConfig.of("lagrangian", return_alpha=0.9)
    with pytest.raises(NpscoError, match="return_alpha needs the references' final returns"):
        make_method(config, MethodContext(MAZE_ID, refs, 0.5))
    method = make_method(config, MethodContext(MAZE_ID, refs, 0.5, reference_returns=(4.0, 8.0, 6.0)))
    assert isinstance(method, Lagrangian) and method.reference_return == 6.0


# ------------------------------------------------------------------- the joint constraint and the return constraint
@pytest.fixture
def maze_states():
    """A state embedding of two avoided maze policies: one visits the left of the map, the other the right."""
    rng = np.random.default_rng(0)
    return StateDistance.fit([rng.uniform([0, 0], [6, 16], (200, 2)), rng.uniform([10, 0], [16, 16], (200, 2))])


def joint_trainer(tiny_maze, maze_policies, states, state_r0, r0=5.0, **settings):
    refs = ReferenceSet([maze_policies.const([0.3, 0.0]), maze_policies.const([0.0, -0.2])], ["a", "b"])
    context = MethodContext(MAZE_ID, refs, r0, states=states, state_r0=state_r0)
    method = make_method(MethodConfig.of("lagrangian", lagrangian_joint=True, **settings), context)
    return Trainer(tiny_maze(num_envs=4, num_steps=16, total_timesteps=64), method, tensorboard=False)


def test_joint_steps_both_sets_of_multipliers_each_on_its_own_distance(tiny_maze, maze_policies, maze_states):
    tr = joint_trainer(tiny_maze, maze_policies, maze_states, state_r0=50.0, lagrangian_margin=0.2)
    method = tr.hooks
    assert isinstance(method, Lagrangian) and method.streams == ("novelty",)
    assert method.target == pytest.approx(6.0) and method.state_target == pytest.approx(60.0)
    metrics = method.update(tr.learner, tr.compute_advantages(tr.collect_rollout()))
    state_d = maze_states.distances(method.previous_embedding)
    np.testing.assert_allclose(method.state_multipliers, 0.1 * (60.0 - state_d) / 60.0)
    assert metrics["lagrangian/state_distance_min"] == pytest.approx(state_d.min())
    # the action multipliers moved on the action distances (both violated at r0 = 5), not on the state ones
    d = metrics["lagrangian/distance_min"]
    assert method.multipliers.max() == pytest.approx(0.1 * (6.0 - d) / 6.0, rel=1e-6)
    assert metrics["lagrangian/loss"] < 0 and metrics["lagrangian/state_lambda_sum"] > 0


def test_joint_keeps_the_state_multipliers_at_zero_while_the_states_are_far_enough(
    tiny_maze, maze_policies, maze_states
):
    tr = joint_trainer(tiny_maze, maze_policies, maze_states, state_r0=1e-6)
    tr.hooks.update(tr.learner, tr.compute_advantages(tr.collect_rollout()))
    assert tr.hooks.state_multipliers.tolist() == [0.0, 0.0] and tr.hooks.multipliers.max() > 0
    phi = maze_states.embed(np.random.default_rng(1).uniform(0, 16, (10, 2)))
    assert np.all(tr.hooks._state_reward(phi, tr.hooks.state_lambdas) == 0)  # no state pressure at all


def test_joint_needs_states_and_a_state_threshold(maze_policies, maze_states):
    refs = ReferenceSet([maze_policies.const([0.3, 0.0]), maze_policies.const([0.0, -0.2])])
    config = MethodConfig.of("lagrangian", lagrangian_joint=True)
    with pytest.raises(NpscoError, match="visited-state embedding"):
        make_method(config, MethodContext(MAZE_ID, refs, 0.5))
    with pytest.raises(NpscoError, match="positive state threshold"):
        make_method(config, MethodContext(MAZE_ID, refs, 0.5, states=maze_states))
    assert Lagrangian.uses_states(config) and not Lagrangian.uses_states(MethodConfig.of("lagrangian"))


def test_the_return_form_maximises_the_nearest_distance_with_weight_one_over_one_plus_nu(
    lagrangian_trainer, tiny_maze, maze_policies
):
    refs = ReferenceSet([maze_policies.const([0.3, 0.0]), maze_policies.const([0.0, -0.2])], ["a", "b"])
    config = MethodConfig.of("lagrangian", lagrangian_constrain="return", return_alpha=0.9)
    context = MethodContext(MAZE_ID, refs, 0.5, reference_returns=(10.0, 10.0))
    method = make_method(config, context)
    assert isinstance(method, Lagrangian) and method.target == 0.5  # no margin: r0 scales the distance only
    tr = Trainer(tiny_maze(num_envs=4, num_steps=128, total_timesteps=512), method, tensorboard=False)
    buf = tr.collect_rollout()
    assert buf.summary.episodes  # some episodes ended: the return constraint has a return to judge
    metrics = method.iteration_metrics(buf.summary)
    nu = metrics["lagrangian/return_multiplier"]
    assert nu == pytest.approx(return_step(0.0, float(np.mean(buf.summary.returns)), 10.0, 0.9, 0.1))
    out = method.update(tr.learner, tr.compute_advantages(buf))
    assert out["lagrangian/novelty_weight"] == pytest.approx(1 / (1 + nu))
    assert method.multipliers.tolist() == [1.0]  # no dual step on the distance: it has no target
    assert out["lagrangian/loss"] < 0


def test_the_return_form_pushes_only_away_from_the_nearest_policy(tiny_maze, maze_policies):
    near, far = maze_policies.const([0.05, 0.0]), maze_policies.const([-1.0, -1.0])
    refs = ReferenceSet([far, near], ["far", "near"])
    config = MethodConfig.of("lagrangian", lagrangian_constrain="return", return_alpha=0.9)
    method = make_method(config, MethodContext(MAZE_ID, refs, 0.5, reference_returns=(10.0,)))
    tr = Trainer(tiny_maze(num_envs=4, num_steps=16, total_timesteps=64), method, tensorboard=False)
    batch = tr.compute_advantages(tr.collect_rollout())
    seen = []
    real = tr.learner.ppo_update
    tr.learner.ppo_update = lambda batch, stream="task", term=None: seen.append(term) or real(batch, stream, term)
    method.update(tr.learner, batch)
    assert seen[0].weights.tolist() == [0.0, 1.0]  # nu = 0 before any episode: weight 1, on the nearest


def test_the_new_lagrangian_settings_are_checked():
    for bad, message in (
        (dict(lagrangian_constrain="both"), "lagrangian_constrain must be one of"),
        (dict(lagrangian_constrain="return"), "needs return_alpha"),
        (dict(lagrangian_joint=True, metric="state"), "work on the action distance"),
        (dict(lagrangian_constrain="return", return_alpha=0.9, metric="state"), "work on the action distance"),
        (dict(lagrangian_constrain="return", return_alpha=0.9, lagrangian_joint=True), "does not go with"),
    ):
        with pytest.raises(NpscoError, match=message):
            MethodConfig.of("lagrangian", **bad).validate()


# ---------------------------------------------------------------------------------------------------------- RSPO
def test_switched_reward_on_exact_numbers():
    reward, switched = switched_reward(
        task=np.array([1.0, 2.0, 3.0, 4.0]),
        intrinsic=np.array([0.5, 0.6, 0.7, 0.8]),
        u=np.array([0.1, 0.1, 0.9, 0.1]),
        episode_step=np.array([5, 21, 21, 30]),
        threshold=0.5,
        t_start=20,
    )
    np.testing.assert_array_equal(switched, [False, True, False, True])  # step 5 is before t_S; 0.9 passes
    np.testing.assert_allclose(reward, [1.0, 0.6, 3.0, 0.8])


def test_intrinsic_reward_is_the_distance_to_the_nearest_avoided_action():
    action = np.array([[0.0, 0.0], [1.0, 1.0]])
    refs = np.array([[[3.0, 4.0], [1.0, 1.0]], [[0.0, 1.0], [1.0, -1.0]]])  # (M=2, N=2, A=2)
    np.testing.assert_allclose(intrinsic_reward(action, refs, r0=0.5, weight=2.0), [2 * 1.0 / 0.5, 0.0])


def test_rspo_switches_and_calibrates_in_a_rollout(tiny_maze, maze_policies):
    refs = ReferenceSet([maze_policies.const([0.9, 0.9])])  # ~1.27 from a fresh policy's mean (~0)
    cfg = tiny_maze(num_envs=4, num_steps=16, total_timesteps=64)
    for r0, switched in ((1e-3, False), (50.0, True)):
        method = make_method(MethodConfig.of("rspo", t_start=1), MethodContext(MAZE_ID, refs, r0))
        tr = Trainer(cfg, method, tensorboard=False)
        buf = tr.collect_rollout()
        metrics = method.iteration_metrics(buf.summary)
        assert (metrics["rspo/switched_frac"] == 1.0) == switched and (metrics["rspo/switched_frac"] == 0) != switched
        assert metrics["rspo/threshold"] == r0
    calibrated = make_method(MethodConfig.of("rspo", t_start=1, rspo_calibrate=0.9), MethodContext(MAZE_ID, refs, 9.0))
    assert isinstance(calibrated, RSPO)
    tr = Trainer(cfg, calibrated, tensorboard=False)
    buf = tr.collect_rollout()
    u = np.concatenate(calibrated._u_steps)[np.concatenate(calibrated._constrained_steps)]
    assert calibrated.iteration_metrics(buf.summary)["rspo/threshold"] == pytest.approx(0.9 * u.mean())


# --------------------------------------------------------------------------------------------- state distance
def test_the_state_distance_approximates_the_rbf_mmd():
    rng = np.random.default_rng(0)
    p, q = rng.normal(0, 1, (400, 3)), rng.normal(1.0, 1, (400, 3))
    sd = StateDistance.fit([p, q], features=4096)
    z = [(x - sd.mean) / sd.std for x in (p, q)]

    def k(a, b):  # the RBF kernel the features approximate
        sq = ((a[:, None] - b[None]) ** 2).sum(-1)
        return np.exp(-sq / (2 * sd.bandwidth**2 * 3))

    mmd = np.sqrt(k(z[0], z[0]).mean() + k(z[1], z[1]).mean() - 2 * k(z[0], z[1]).mean())
    assert sd.pairwise()[0, 1] == pytest.approx(mmd, abs=0.03)
    assert sd.distances(sd.mean_embedding(p))[0] == pytest.approx(0.0, abs=1e-12)


def test_the_state_distance_is_a_symmetric_zero_diagonal_matrix_and_round_trips():
    rng = np.random.default_rng(1)
    sd = StateDistance.fit([rng.normal(m, 1, (50, 4)) for m in (0.0, 0.5, 3.0)])
    d = sd.pairwise()
    np.testing.assert_allclose(d, d.T)
    assert np.all(np.diag(d) == 0) and d[0, 2] > d[0, 1] > 0
    again = StateDistance.from_dict(sd.to_dict())
    np.testing.assert_array_equal(again.frequencies, sd.frequencies)
    np.testing.assert_allclose(again.pairwise(), d)
    assert dataclasses.replace(sd.subset([2]), embeddings=sd.embeddings[[2]]).embeddings.shape == (1, 512)


def test_the_witness_points_from_the_avoided_distribution_to_ours():
    w = witness(np.array([1.0, 0.0]), np.array([[0.0, 0.0], [1.0, 0.0]]))
    np.testing.assert_allclose(w, [[1.0, 0.0], [0.0, 0.0]])
