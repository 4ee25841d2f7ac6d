"""The numpy updates of TNB, CTNB and CPO against their torch references (tests/oracles/), to float32 rounding: TNB's
minibatch gradients (task and novelty surrogates, bisector, critics, entropy) against autograd on random data, whole
TNB and CTNB updates (parameters, Adam state, statistics) on real maze batches, CPO's surrogate gradients (with its
direct cost term), its Fisher-vector products against double backward, its trial evaluations, its whole step (case,
lambda, nu, accepted step) and update; the bisector's numpy and torch forms; an optimiser the learner does not handle;
and that no method writes into the learner's buffers. (The critics' fit, which CPO runs, is checked with PPO's update
in test_fast_update.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from npsco.methods import make_method
from npsco.methods.base import MethodContext
from npsco.methods.constrained import TNB_RULES, bisector, bisector_np, get_flat_params, set_flat_params
from npsco.methods.cpo_problem import CPOProblem
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.ppo.fast_update import Minibatch, NumpyLearner
from npsco.tasks import MAZE_ID
from oracles.cpo import TorchCPOProblem
from oracles.tnb import bisector_grads
from oracles.torch_learner import TorchLearner
from oracles.torch_update import torch_update


@pytest.fixture
def novel_trainer(update_trainer, maze_policies):
    """`novel_trainer(method, r0=0.3, knobs=None, **settings)`: `update_trainer(**settings)` with the method `method`
    (its `knobs`) against two references: the step policy and a constant one."""

    def make(method: str, r0: float = 0.3, knobs: dict | None = None, **settings):
        refs = ReferenceSet([maze_policies.step(), maze_policies.const([-0.5, 0.4])], ["step", "const"])
        hooks = make_method(MethodConfig.of(method, **(knobs or {})), MethodContext(MAZE_ID, refs, r0))
        return update_trainer(hooks, **settings)

    return make


def rollout_batch(tr):
    return tr.compute_advantages(tr.collect_rollout())


def method_update(hooks, learner, batch):
    """The method's own update (numpy)."""
    return hooks.update(learner, batch)


def both_updates(tr, learner_state, update):
    """`update(run)` from the trainer's current state, `run(hooks, learner, batch)` the torch reference
    (`torch_update`) and then the method's own update: each run's (parameters, Adam state, result) and the parameters
    before; the trainer is left after the numpy run."""
    snap, before = learner_state.snapshot(tr), learner_state.params(tr)
    runs = [learner_state.run(tr, snap, lambda r=r: update(r)) for r in (torch_update, method_update)]
    return runs[0], runs[1], before


# ------------------------------------------------------------------------------------------------- bisector
@st.composite
def _gradient_pair(draw):
    """Two float32 gradients: random, or one of them zero, or (anti)parallel up to a small perturbation."""
    dim = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    f = rng.normal(size=dim) * rng.uniform(0.01, 100.0)
    kind = draw(st.sampled_from(["random", "zero f", "zero g", "parallel", "antiparallel"]))
    g = rng.normal(size=dim) * rng.uniform(0.01, 100.0)
    if kind == "zero f":
        f = np.zeros(dim)
    elif kind == "zero g":
        g = np.zeros(dim)
    elif kind in ("parallel", "antiparallel"):
        g = (1.0 if kind == "parallel" else -1.0) * rng.uniform(0.1, 10.0) * f + rng.normal(size=dim) * 1e-9
    return f.astype(np.float32), g.astype(np.float32)


@settings(max_examples=150, deadline=None)
@given(_gradient_pair(), st.sampled_from([*TNB_RULES, "paper"]))
def test_the_torch_bisector_is_the_numpy_one_and_float32_agrees_with_float64(pair, rule):
    f, g = pair
    p = bisector_np(f, g, rule)
    assert p.dtype == np.float32 and np.all(np.isfinite(p))
    torch_p = bisector(torch.from_numpy(f), torch.from_numpy(g), rule)
    assert torch_p.dtype == torch.float32 and np.array_equal(torch_p.numpy(), p)  # one definition, bit for bit
    # float32 (the updates) against float64 (the same rule on exact inputs): equal to float32 rounding, except where
    # rounding may take another branch (cos within rounding of 0, or f and g antiparallel within the tolerance)
    f64, g64 = f.astype(np.float64), g.astype(np.float64)
    norms = np.linalg.norm(f64) * np.linalg.norm(g64)
    cos = f64 @ g64 / norms if norms > 0 else 0.0
    if abs(cos) > 1e-3 and 1 + cos > 1e-2:
        p64 = bisector_np(f64, g64, rule)
        scale = np.linalg.norm(f64) + np.linalg.norm(g64)
        np.testing.assert_allclose(p, p64, rtol=0, atol=1e-4 * scale)


# ------------------------------------------------------------------------------------------------------ TNB
@pytest.mark.parametrize("rule", TNB_RULES)
@pytest.mark.parametrize("angle", ["acute", "obtuse"])
@pytest.mark.parametrize("norm_adv", [True, False])
def test_tnb_minibatch_gradients_equal_autograd_on_random_data(rule, angle, norm_adv, novel_trainer, random_batch):
    tr = novel_trainer("tnb", knobs={"tnb_rule": rule}, norm_adv=norm_adv, ent_coef=0.01, clip_vloss=True)
    with torch.no_grad():
        tr.agent.actor_logstd.copy_(torch.tensor([[-0.4, 0.3]]))
    rng = np.random.default_rng(1)
    batch = random_batch(tr.agent, tr.streams, 256, rng)
    # novelty advantages along or against the task's: f and g at an acute or obtuse angle
    noise = torch.from_numpy(rng.normal(0, 0.3, 256).astype(np.float32))
    task = batch.advantages["task"] - batch.advantages["task"].mean()
    batch.advantages["task"], batch.advantages["novelty"] = task, (1.0 if angle == "acute" else -1.0) * task + noise
    # torch: the reference step's .grad
    tr.learner.optimizer.zero_grad(set_to_none=True)
    expected_stats = bisector_grads(tr.hooks, TorchLearner(tr.learner), batch, torch.arange(256))
    # numpy: the fast step's gradient vector
    fast = NumpyLearner(tr.cfg, tr.agent, tr.learner.optimizer, tr.streams, tr.learner.minibatches)
    fast._load()
    stats = tr.hooks.bisector_step(fast, Minibatch.of(batch, ("task", "novelty"), tr.streams))

    assert (expected_stats["cos"] > 0) == (angle == "acute") and 0.2 < float(expected_stats["clipfrac"]) < 0.8
    expected = torch.cat([p.grad.reshape(-1) for p in fast.params]).numpy()
    np.testing.assert_allclose(fast.grad, expected, rtol=1e-4, atol=1e-6 * np.abs(expected).max())
    assert stats.keys() == expected_stats.keys()
    for k, v in expected_stats.items():
        assert float(stats[k]) == pytest.approx(v.item(), rel=1e-5, abs=1e-7), k


@pytest.mark.parametrize("history", ["fresh", "warm"])
@pytest.mark.parametrize("rule", TNB_RULES)
def test_tnb_update_equals_the_torch_update_on_maze_batches(history, rule, novel_trainer, learner_state):
    tr = novel_trainer("tnb", knobs={"tnb_rule": rule}, ent_coef=0.003)
    batch = rollout_batch(tr)
    if history == "warm":  # a torch update first: the numpy one carries on from its Adam state
        torch_update(tr.hooks, tr.learner, batch)
        batch = rollout_batch(tr)
    expected, got, before = both_updates(tr, learner_state, lambda run: run(tr.hooks, tr.learner, batch))
    learner_state.assert_same(expected, got, before)
    assert {"tnb/cos", "tnb/obtuse_frac", "losses/novelty_policy_loss"} <= got[2].keys()


@pytest.mark.parametrize("r0, violated", [(1e-6, False), (5.0, True)])
def test_ctnb_update_equals_the_torch_update_in_both_branches(r0, violated, novel_trainer, learner_state):
    tr = novel_trainer("ctnb", r0=r0)
    batch = rollout_batch(tr)
    margins = (tr.hooks._margin_sum, tr.hooks._active_steps)

    def update(run):
        tr.hooks._margin_sum, tr.hooks._active_steps = margins  # (the update resets them)
        return run(tr.hooks, tr.learner, batch)

    expected, got, before = both_updates(tr, learner_state, update)
    learner_state.assert_same(expected, got, before)
    assert got[2]["ctnb/constraint_active"] == float(violated) and ("tnb/cos" in got[2]) == violated


# ---------------------------------------------------------------------------------------------------- CPO
CPO_KNOBS = {
    "mean": {},
    "mean-w2": {"metric": "wasserstein2"},
    "sample-w2": {"novelty_action": "sample", "metric": "wasserstein2"},
}


def cpo_problems(tr, batch, damping: float = 0.1):
    """The torch and numpy problems of `batch` around the current actor, with the method's direct cost."""
    direct = tr.hooks.direct_cost()
    return (
        TorchCPOProblem(tr.agent, batch, tr.cfg.norm_adv, damping, direct),
        CPOProblem(tr.agent, batch, tr.cfg.norm_adv, damping, direct),
    )


def spread_actor(tr) -> None:
    """Give the actor a non-unit std and mean actions beyond the action bounds at some states (the clip's two sides)."""
    with torch.no_grad():
        tr.agent.actor_logstd.copy_(torch.tensor([[-0.4, 0.3]]))
        last = tr.agent.actor_mean[-1]
        last.weight.mul_(150.0)
        last.bias.copy_(torch.tensor([0.6, -0.5]))


@pytest.mark.parametrize("knobs", CPO_KNOBS.values(), ids=CPO_KNOBS.keys())
def test_cpo_surrogates_and_gradients_equal_autograd(knobs, novel_trainer):
    tr = novel_trainer("cpo", knobs=knobs)
    spread_actor(tr)
    batch = rollout_batch(tr)
    with torch.no_grad():
        mean = tr.agent.actor_mean(batch.obs)
    assert 0.1 < float(((mean < -1) | (mean > 1)).float().mean()) < 0.9  # both sides of the clip
    torch_problem, numpy_problem = cpo_problems(tr, batch)
    r_t, c_t, g_t, b_t = torch_problem.gradients()
    r_n, c_n, g_n, b_n = numpy_problem.gradients()
    assert g_n.dtype == b_n.dtype == torch.float32
    assert r_n == pytest.approx(r_t, abs=1e-6) and c_n == pytest.approx(c_t, abs=1e-6)
    for got, expected in ((g_n, g_t), (b_n, b_t)):
        assert expected.norm() > 0
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5 * expected.abs().max().item())
    # the direct term is in b: with the mean action compared it moves the mean MLP, with wasserstein2 the log-std
    direct = tr.hooks.direct_cost()
    d_mean, d_log_std = direct.value_and_grads(mean.numpy(), tr.agent.actor_logstd.detach().numpy()[0])[1:]
    assert (np.abs(d_mean).sum() > 0) == (knobs.get("novelty_action", "mean") == "mean")
    assert (np.abs(d_log_std).sum() > 0) == ("metric" in knobs)


@pytest.mark.parametrize("damping", [0.1, 1e-3])
def test_cpo_fisher_vector_products_equal_double_backward(damping, novel_trainer):
    tr = novel_trainer("cpo")
    spread_actor(tr)
    batch = rollout_batch(tr)
    torch_problem, numpy_problem = cpo_problems(tr, batch, damping)
    rng = np.random.default_rng(5)
    for scale in (1.0, 1e-3, 1e3):
        v = torch.from_numpy((scale * rng.normal(size=torch_problem.theta_old.numel())).astype(np.float32))
        expected, got = torch_problem.fisher_product(v), numpy_problem.fisher_product(v)
        assert got.dtype == torch.float32
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5 * expected.abs().max().item())
    # F is symmetric positive semi-definite: v.Fw = w.Fv, v.(F + damping I)v >= damping |v|^2
    v, w = (torch.from_numpy(rng.normal(size=v.numel()).astype(np.float32)) for _ in range(2))
    assert torch.dot(v, numpy_problem.fisher_product(w)).item() == pytest.approx(
        torch.dot(w, numpy_problem.fisher_product(v)).item(), rel=1e-4
    )
    assert torch.dot(v, numpy_problem.fisher_product(v)).item() >= damping * torch.dot(v, v).item() * (1 - 1e-5)


@pytest.mark.parametrize("knobs", CPO_KNOBS.values(), ids=CPO_KNOBS.keys())
def test_cpo_trial_evaluations_equal_torch_and_leave_the_actor(knobs, novel_trainer):
    tr = novel_trainer("cpo", knobs=knobs)
    spread_actor(tr)
    batch = rollout_batch(tr)
    torch_problem, numpy_problem = cpo_problems(tr, batch)
    theta_old = torch_problem.theta_old.clone()
    rng = np.random.default_rng(2)
    for scale in (0.0, 1e-3, 1e-2):
        theta = theta_old + torch.from_numpy((scale * rng.normal(size=theta_old.numel())).astype(np.float32))
        actor = get_flat_params(tr.agent.actor_parameters())
        got = numpy_problem.evaluate(theta)
        assert torch.equal(get_flat_params(tr.agent.actor_parameters()), actor)  # numpy: the actor stays
        expected = torch_problem.evaluate(theta)  # torch: sets the actor to theta
        assert got == pytest.approx(expected, rel=1e-4, abs=1e-6)
        if scale == 0.0:
            assert got[2] == pytest.approx(0.0, abs=1e-7)  # no KL at theta_old


@pytest.mark.parametrize("r0, cases", [(1e-6, (2.0, 3.0)), (5.0, (0.0, 1.0)), (0.3, (0.0, 1.0, 2.0, 3.0))])
@pytest.mark.parametrize("knobs", CPO_KNOBS.values(), ids=CPO_KNOBS.keys())
def test_cpo_step_equals_the_torch_step(r0, cases, knobs, novel_trainer):
    tr = novel_trainer("cpo", r0=r0, knobs=knobs)
    batch = rollout_batch(tr)
    cost = tr.hooks._cost_sum / tr.hooks._cost_n
    theta_old = get_flat_params(tr.agent.actor_parameters()).clone()
    out, theta = {}, {}
    for name, problem in zip(("torch", "numpy"), cpo_problems(tr, batch), strict=True):
        set_flat_params(tr.agent.actor_parameters(), theta_old)  # (both problems were built there)
        out[name] = tr.hooks.policy_step(problem, cost)
        theta[name] = get_flat_params(tr.agent.actor_parameters()).clone()
    got, expected = out["numpy"], out["torch"]
    assert expected["cpo/case"] in cases and expected["cpo/step_accepted"] == 1.0
    for k in ("cpo/case", "cpo/step_accepted", "cpo/backtracks"):
        assert got[k] == expected[k], k
    for k in ("cpo/lambda", "cpo/nu", "cpo/kl", "cpo/surrogate_change", "cpo/cost_surrogate_change"):
        assert got[k] == pytest.approx(expected[k], rel=1e-3, abs=1e-7), k
    step_t, step_n = theta["torch"] - theta_old, theta["numpy"] - theta_old
    assert step_t.norm() > 0 and ((step_n - step_t).norm() / step_t.norm()).item() < 1e-3


def test_cpo_update_equals_the_torch_update(novel_trainer, learner_state):
    tr = novel_trainer("cpo", r0=0.3)
    batch = rollout_batch(tr)
    collected = tr.hooks._cost_sum, tr.hooks._cost_n, {k: v.copy() for k, v in tr.hooks._nearest.items()}
    center = tr.hooks.cost_center

    def update(run):
        tr.hooks._cost_sum, tr.hooks._cost_n = collected[:2]  # (the update resets what the rollout collected)
        tr.hooks._nearest = {k: v.copy() for k, v in collected[2].items()}
        tr.hooks.cost_center = center
        return run(tr.hooks, tr.learner, batch)

    expected, got, before = both_updates(tr, learner_state, update)
    learner_state.assert_same(expected, got, before, rel=1e-3)
    assert got[2]["cpo/step_accepted"] == 1.0


# ------------------------------------------------------------------------------------------- what it refuses
@pytest.mark.parametrize("method", ["tnb", "ctnb", "cpo"])
def test_an_optimiser_the_learner_does_not_handle_is_a_clear_error(method, novel_trainer):
    tr = novel_trainer(method, r0=5.0)  # (CTNB: violated, the bisector step)
    batch = rollout_batch(tr)
    tr.learner.optimizer = torch.optim.SGD(tr.agent.parameters(), lr=1e-2)
    before = get_flat_params(tr.agent.parameters()).clone()
    with pytest.raises(TypeError, match="cannot update this agent and optimiser: the optimiser is not torch.optim"):
        tr.hooks.update(tr.learner, batch)
    assert torch.equal(get_flat_params(tr.agent.parameters()), before)  # nothing stepped


LEARNER_BUFFERS = ("grad", "log_std_grad", "actor_grad", "critics_grad", "flat", "exp_avg", "exp_avg_sq", "steps")
"""`NumpyLearner`'s buffers: what its calls (`actor_backward`, `set_actor_direction`, `critics_backward`) write."""


def test_no_method_writes_into_the_learners_buffers():
    """A method reaches the learner's state through its calls, never by writing its buffers (or a parameter's
    `.grad`): no assignment to, and no `out=` into, an attribute of that name in npsco.methods."""
    methods = Path(__file__).resolve().parents[2] / "src" / "npsco" / "methods"
    written = []
    for path in sorted(methods.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.Call):
                targets = [k.value for k in node.keywords if k.arg == "out"]
            for target in targets:
                while isinstance(target, ast.Subscript):
                    target = target.value
                if isinstance(target, ast.Attribute) and target.attr in LEARNER_BUFFERS:
                    written.append(f"{path.name}:{node.lineno}")
    assert written == []
