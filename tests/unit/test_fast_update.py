"""The numpy PPO update (`NumpyLearner`) against the torch reference loop (tests/oracles/torch_learner.py): the same
gradients on random data (both branches of every clip exercised), the same whole update (parameters, Adam state,
statistics), the same early stop, the torch optimiser still usable afterwards, a clear error for an agent or
optimiser it does not handle, and numpy's BLAS threads during the update."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from npsco.ppo import fast_update as numpy_update
from npsco.ppo.fast_update import Minibatch, NumpyLearner
from npsco.ppo.hooks import Hooks, StepOutcome
from oracles.torch_learner import TorchLearner, normalize_advantages, policy_loss


class ExtraStream(Hooks):
    """A method with a second reward stream (like TNB's novelty), so the update trains two critics."""

    streams = ("novelty",)

    def on_step(self, step):
        return StepOutcome(streams={"novelty": np.sin(step.obs[:, 0]).astype(np.float32)})


def flat_grads(params) -> np.ndarray:
    return torch.cat([p.grad.reshape(-1) for p in params]).numpy()


@pytest.mark.parametrize("clip_vloss", [True, False])
@pytest.mark.parametrize("norm_adv", [True, False])
@pytest.mark.parametrize("method", [None, ExtraStream()], ids=["task", "two-streams"])
def test_gradient_equals_torch_autograd_on_random_data(clip_vloss, norm_adv, method, update_trainer, random_batch):
    tr = update_trainer(method, clip_vloss=clip_vloss, norm_adv=norm_adv, ent_coef=0.01, clip_coef=0.2)
    with torch.no_grad():
        tr.agent.actor_logstd.copy_(torch.tensor([[-0.4, 0.3]]))
    batch = random_batch(tr.agent, tr.streams, 256, np.random.default_rng(0))
    obs, actions, old_lp, adv = batch.obs, batch.actions, batch.logprobs, batch.advantages["task"]

    # torch: exactly the loss of the reference's ppo_update
    cfg, agent = tr.cfg, tr.agent
    new_lp, entropy, _ = agent.evaluate(obs, actions)
    a = normalize_advantages(adv) if norm_adv else adv
    pg, info = policy_loss(new_lp, old_lp, a, cfg.clip_coef)
    v_loss = TorchLearner(tr.learner).critic_loss(batch, torch.arange(256), obs)
    loss = pg - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
    tr.learner.optimizer.zero_grad(set_to_none=True)
    loss.backward()

    fast = NumpyLearner(tr.cfg, tr.agent, tr.learner.optimizer, tr.streams, tr.learner.minibatches)
    fast._load()
    stats = fast.ppo_step(Minibatch.of(batch, ("task",), tr.streams))
    assert 0.2 < float(info["clipfrac"]) < 0.8  # both branches of the surrogate's clip are exercised
    expected = flat_grads(fast.params)
    np.testing.assert_allclose(fast.grad, expected, rtol=1e-4, atol=1e-6)
    expected_stats = [t.detach().item() for t in (pg, v_loss, entropy, info["approx_kl"], info["clipfrac"])]
    np.testing.assert_allclose(list(stats.values()), expected_stats, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("history", ["fresh", "warm", "uneven-steps"])
@pytest.mark.parametrize("method", [None, ExtraStream()], ids=["task", "two-streams"])
def test_whole_update_equals_the_torch_loop(history, method, update_trainer, learner_state):
    tr = update_trainer(method, ent_coef=0.003)
    batch = tr.compute_advantages(tr.collect_rollout())
    if history != "fresh":
        TorchLearner(tr.learner).ppo_update(batch)
        batch = tr.compute_advantages(tr.collect_rollout())
    if history == "uneven-steps":  # a critic-only torch step (as CPO's critic update): the actor's Adam lags behind
        tr.learner.optimizer.zero_grad(set_to_none=True)
        TorchLearner(tr.learner).critic_loss(batch, torch.arange(64)).backward()
        tr.learner.optimizer.step()
    snap = learner_state.snapshot(tr)
    before = learner_state.params(tr)
    expected = learner_state.run(tr, snap, lambda: TorchLearner(tr.learner).ppo_update(batch))
    assert NumpyLearner.unsupported(tr.agent, tr.learner.optimizer, tr.streams) is None
    got = learner_state.run(tr, snap, lambda: tr.learner.ppo_update(batch))
    learner_state.assert_same(expected, got, before, rel=1e-4)
    # the torch optimiser carries on from the state the numpy update left
    tr.learner.optimizer.zero_grad(set_to_none=True)
    TorchLearner(tr.learner).critic_loss(batch, torch.arange(64)).backward()
    tr.learner.optimizer.step()
    assert np.all(np.isfinite(learner_state.params(tr)))


@pytest.mark.parametrize("history", ["fresh", "warm"])
def test_the_critics_fit_equals_the_torch_loop_and_leaves_the_actor(history, update_trainer, learner_state):
    tr = update_trainer(ExtraStream())
    batch = tr.compute_advantages(tr.collect_rollout())
    if history == "warm":  # a PPO update first: then the actor's Adam is ahead of the critics'
        tr.learner.ppo_update(batch)
    snap = learner_state.snapshot(tr)
    before = learner_state.params(tr)
    actor = torch.cat([p.detach().reshape(-1) for p in tr.agent.actor_parameters()]).clone()
    expected = learner_state.run(tr, snap, lambda: TorchLearner(tr.learner).fit_critics(batch))
    got = learner_state.run(tr, snap, lambda: tr.learner.fit_critics(batch))
    learner_state.assert_same(expected, got, before)  # the actor's Adam steps (or their absence) kept
    assert torch.equal(torch.cat([p.detach().reshape(-1) for p in tr.agent.actor_parameters()]), actor)
    assert all(p.grad is None for p in tr.agent.actor_parameters())  # as the torch loop leaves them
    assert all(p.grad is not None for p in tr.agent.critic_parameters())


def test_early_stop_on_target_kl_matches(update_trainer, learner_state):
    tr = update_trainer(target_kl=1e-9)
    batch = tr.compute_advantages(tr.collect_rollout())
    snap = learner_state.snapshot(tr)
    TorchLearner(tr.learner).ppo_update(batch)
    steps_torch = learner_state.adam(tr)[2]
    learner_state.restore(tr, snap)
    tr.learner.ppo_update(batch)
    steps_numpy = learner_state.adam(tr)[2]
    np.testing.assert_array_equal(steps_numpy, steps_torch)
    assert steps_numpy[0] == tr.cfg.num_minibatches  # one epoch only


def test_an_optimiser_it_does_not_handle_is_a_clear_error(update_trainer):
    tr = update_trainer()
    tr.learner.optimizer = torch.optim.SGD(tr.agent.parameters(), lr=1e-3)
    batch = tr.compute_advantages(tr.collect_rollout())
    with pytest.raises(
        TypeError, match="cannot update this agent and optimiser: the optimiser is not torch.optim.Adam"
    ):
        tr.learner.ppo_update(batch)


def test_the_numpy_update_is_built_once_per_agent_and_optimiser(monkeypatch, update_trainer):
    built = []
    original = NumpyLearner.__init__
    monkeypatch.setattr(NumpyLearner, "__init__", lambda self, *a: built.append(1) or original(self, *a))
    tr = update_trainer()
    batch = tr.compute_advantages(tr.collect_rollout())
    tr.learner.ppo_update(batch)
    tr.learner.ppo_update(batch)
    assert len(built) == 1
    tr.learner.optimizer = torch.optim.Adam(tr.agent.parameters(), lr=1e-4, eps=1e-5)  # another optimiser: built for it
    tr.learner.ppo_update(batch)
    assert len(built) == 2 and tr.learner.optimizer.state[tr.agent.actor_logstd]["step"] == tr.cfg.num_minibatches * 3


def test_the_update_runs_numpys_blas_with_torch_threads_and_restores_it(monkeypatch, update_trainer):
    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    if not blas_threads():
        pytest.skip("numpy's BLAS is not one that threadpoolctl controls")
    seen = []
    original = NumpyLearner._load
    monkeypatch.setattr(NumpyLearner, "_load", lambda self, *a: seen.append(blas_threads()) or original(self, *a))
    tr = update_trainer(torch_threads=1)
    batch = tr.compute_advantages(tr.collect_rollout())
    with threadpool_limits(2, user_api="blas"):
        tr.learner.ppo_update(batch)
        assert blas_threads() == [2] * len(blas_threads())
    assert seen == [[1] * len(seen[0])]
    assert numpy_update._blas() is numpy_update._blas()  # the libraries are looked up once
