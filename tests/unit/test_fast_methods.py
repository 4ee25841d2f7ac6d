"""The numpy updates of TNB and CTNB against their torch references, to float32 rounding: TNB's minibatch gradients
(task and novelty surrogates, bisector, critics, entropy) against autograd on random data, whole TNB and CTNB updates
(parameters, Adam state, statistics) on real maze batches; the bisector's numpy and torch forms; the backend choice
and its fallback."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from npsco.methods import make_method
from npsco.methods.base import MethodContext
from npsco.methods.constrained import TNB_RULES, bisector, bisector_np
from npsco.methods.settings import MethodConfig
from npsco.methods.tnb import TNB
from npsco.novelty.references import ReferenceSet
from npsco.ppo.fast_update import Minibatch, NumpyLearner
from npsco.tasks import MAZE_ID


@pytest.fixture
def novel_trainer(update_trainer, maze_policies):
    """`novel_trainer(method, r0=0.3, knobs=None, **settings)`: `update_trainer(**settings)` with the method `method`
    (its `knobs`) against two references: the step policy and a constant one."""

    def make(method: str, r0: float = 0.3, knobs: dict | None = None, **settings):
        refs = ReferenceSet([maze_policies.step(), maze_policies.const([-0.5, 0.4])], ["step", "const"])
        hooks = make_method(MethodConfig.of(method, **(knobs or {})), MethodContext(MAZE_ID, refs, r0))
        return update_trainer(hooks, **settings)

    return make


def use_backend(tr, backend: str) -> None:
    """Switch the trainer's learner to `backend` (the learner reads it at every update)."""
    tr.learner.cfg = dataclasses.replace(tr.learner.cfg, update_backend=backend)


def rollout_batch(tr):
    return tr.compute_advantages(tr.collect_rollout())


def both_backends(tr, learner_state, update):
    """`update()` from the trainer's current state with the torch backend and with the numpy one: each run's
    (parameters, Adam state, result) and the parameters before; the trainer is left after the numpy run."""
    snap, before = learner_state.snapshot(tr), learner_state.params(tr)
    runs = [learner_state.run(tr, snap, lambda b=b: use_backend(tr, b) or update()) for b in ("torch", "numpy")]
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
    expected_stats = tr.hooks.bisector_grads(tr.learner, batch, torch.arange(256))
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
        use_backend(tr, "torch")
        tr.hooks.update(tr.learner, batch)
        batch = rollout_batch(tr)
    expected, got, before = both_backends(tr, learner_state, lambda: tr.hooks.update(tr.learner, batch))
    learner_state.assert_same(expected, got, before)
    assert {"tnb/cos", "tnb/obtuse_frac", "losses/novelty_policy_loss"} <= got[2].keys()


@pytest.mark.parametrize("r0, violated", [(1e-6, False), (5.0, True)])
def test_ctnb_update_equals_the_torch_update_in_both_branches(r0, violated, novel_trainer, learner_state):
    tr = novel_trainer("ctnb", r0=r0)
    batch = rollout_batch(tr)
    margins = (tr.hooks._margin_sum, tr.hooks._active_steps)

    def update():
        tr.hooks._margin_sum, tr.hooks._active_steps = margins  # (the update resets them)
        return tr.hooks.update(tr.learner, batch)

    expected, got, before = both_backends(tr, learner_state, update)
    learner_state.assert_same(expected, got, before)
    assert got[2]["ctnb/constraint_active"] == float(violated) and ("tnb/cos" in got[2]) == violated


# ------------------------------------------------------------------------------------- choice and fallback
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_update_backend_selects_each_methods_path(backend, novel_trainer, monkeypatch):
    calls = []

    def record(cls, name, what):
        original = getattr(cls, name)
        monkeypatch.setattr(cls, name, lambda self, *a: calls.append(what(a)) or original(self, *a))

    record(TNB, "bisector_step", lambda args: "bisector_step")
    record(TNB, "bisector_grads", lambda args: "bisector_grads")
    tr = novel_trainer("tnb", update_backend=backend)
    tr.hooks.update(tr.learner, rollout_batch(tr))
    assert set(calls) == {"bisector_step" if backend == "numpy" else "bisector_grads"}


@pytest.mark.parametrize("method", ["tnb", "ctnb"])
def test_an_unsupported_optimiser_warns_once_and_runs_the_torch_update(method, novel_trainer, learner_state):
    tr = novel_trainer(method, r0=5.0)  # (CTNB: violated, the bisector step)
    batch = rollout_batch(tr)
    rollout = {k: v for k, v in vars(tr.hooks).items() if k.startswith("_")}
    tr.learner.optimizer = torch.optim.SGD(tr.agent.parameters(), lr=1e-2)
    snap = learner_state.snapshot(tr)
    use_backend(tr, "torch")
    tr.hooks.update(tr.learner, batch)
    expected = learner_state.params(tr)
    learner_state.restore(tr, snap)
    vars(tr.hooks).update(rollout)
    use_backend(tr, "numpy")
    with pytest.warns(UserWarning, match="update_backend=numpy: the optimiser is not torch.optim.Adam") as warned:
        tr.hooks.update(tr.learner, batch)
    assert len(warned) == 1
    np.testing.assert_array_equal(learner_state.params(tr), expected)
