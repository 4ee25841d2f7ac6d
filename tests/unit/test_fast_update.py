"""The numpy PPO update (`NumpyPPOUpdate`) against the torch reference loop (`Learner.ppo_update_torch`): the same
gradients on random data (both branches of every clip exercised), the same whole update (parameters, Adam state,
statistics), the same early stop, the torch optimiser still usable afterwards, the `update_backend` setting, a
fallback with a warning when it cannot apply, and numpy's BLAS threads during the update."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from npsco.errors import NpscoError
from npsco.ppo import fast_update as numpy_update
from npsco.ppo.config import PPOConfig
from npsco.ppo.fast_update import NumpyPPOUpdate
from npsco.ppo.hooks import Hooks, StepOutcome
from npsco.ppo.learner import Learner
from npsco.ppo.maths import normalize_advantages, policy_loss
from npsco.ppo.rollout import Batch
from npsco.ppo.trainer import Trainer


class ExtraStream(Hooks):
    """A method with a second reward stream (like TNB's novelty), so the update trains two critics."""

    streams = ("novelty",)

    def on_step(self, step):
        return StepOutcome(streams={"novelty": np.sin(step.obs[:, 0]).astype(np.float32)})


@pytest.fixture
def maze_trainer(tiny_maze):
    """`maze_trainer(method=None, **settings)`: a maze trainer of 8 envs x 32 steps, 4
    minibatches, 3 epochs and small networks, `settings` over them."""

    def make(method=None, **settings) -> Trainer:
        base = dict(num_envs=8, num_steps=32, num_minibatches=4, update_epochs=3, actor_hidden=(32, 10), seed=3)
        cfg = tiny_maze(**{**base, "critic_hidden": (16,), **settings})
        return Trainer(cfg, method, tensorboard=False)

    return make


def flat_grads(params) -> np.ndarray:
    return torch.cat([p.grad.reshape(-1) for p in params]).numpy()


def random_minibatch(tr: Trainer, B: int, rng: np.random.Generator):
    agent = tr.agent
    obs = torch.from_numpy(rng.standard_normal((B, agent.obs_dim)).astype(np.float32))
    with torch.no_grad():
        mean = agent.actor_mean(obs)
        actions = mean + torch.from_numpy(rng.standard_normal(mean.shape).astype(np.float32))
        logprob, _, _ = agent.evaluate(obs, actions)
    old_logprob = logprob + torch.from_numpy(rng.normal(0.0, 0.4, B).astype(np.float32))  # ratios far from 1 too
    adv = torch.from_numpy(rng.normal(0.3, 1.5, B).astype(np.float32))
    values = {s: torch.from_numpy(rng.normal(0, 1, B).astype(np.float32)) for s in tr.streams}
    returns = {s: values[s] + torch.from_numpy(rng.normal(0, 0.5, B).astype(np.float32)) for s in tr.streams}
    return obs, actions, old_logprob, adv, values, returns


@pytest.mark.parametrize("clip_vloss", [True, False])
@pytest.mark.parametrize("norm_adv", [True, False])
@pytest.mark.parametrize("method", [None, ExtraStream()], ids=["task", "two-streams"])
def test_gradient_equals_torch_autograd_on_random_data(clip_vloss, norm_adv, method, maze_trainer):
    tr = maze_trainer(method, clip_vloss=clip_vloss, norm_adv=norm_adv, ent_coef=0.01, clip_coef=0.2)
    with torch.no_grad():
        tr.agent.actor_logstd.copy_(torch.tensor([[-0.4, 0.3]]))
    rng = np.random.default_rng(0)
    obs, actions, old_lp, adv, values, returns = random_minibatch(tr, 256, rng)

    # torch: exactly the loss of ppo_update_torch
    cfg, agent = tr.cfg, tr.agent
    new_lp, entropy, _ = agent.evaluate(obs, actions)
    a = normalize_advantages(adv) if norm_adv else adv
    pg, info = policy_loss(new_lp, old_lp, a, cfg.clip_coef)
    mb = torch.arange(256)
    batch = Batch(
        obs=obs, actions=actions, logprobs=old_lp, advantages={"task": adv}, returns=returns, values=values, size=256
    )
    v_loss = tr.learner.critic_loss(batch, mb, obs)
    loss = pg - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
    tr.learner.optimizer.zero_grad(set_to_none=True)
    loss.backward()

    fast = NumpyPPOUpdate(tr.cfg, tr.agent, tr.learner.optimizer, tr.streams)
    fast._load()
    stats = fast.loss_and_grad(
        obs.numpy(),
        actions.numpy(),
        old_lp.numpy(),
        adv.numpy(),
        {s: v.numpy() for s, v in values.items()},
        {s: r.numpy() for s, r in returns.items()},
    )
    assert 0.2 < float(info["clipfrac"]) < 0.8  # both branches of the surrogate's clip are exercised
    expected = flat_grads(fast.params)
    np.testing.assert_allclose(fast.grad, expected, rtol=1e-4, atol=1e-6)
    expected_stats = [t.detach().item() for t in (pg, v_loss, entropy, info["approx_kl"], info["clipfrac"])]
    np.testing.assert_allclose(stats, expected_stats, rtol=1e-5, atol=1e-7)


def snapshot(tr: Trainer):
    return (
        copy.deepcopy(tr.agent.state_dict()),
        copy.deepcopy(tr.learner.optimizer.state_dict()),
        tr.learner.torch_rng.get_state(),
    )


def restore(tr: Trainer, snap) -> None:
    tr.agent.load_state_dict(snap[0])
    tr.learner.optimizer.load_state_dict(copy.deepcopy(snap[1]))  # (load_state_dict aliases the tensors it is given)
    tr.learner.torch_rng.set_state(snap[2])


def params_vector(tr: Trainer) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1) for p in tr.agent.parameters()]).numpy().copy()


def adam_state(tr: Trainer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    st = [tr.learner.optimizer.state[p] for p in tr.agent.parameters()]
    return (
        np.concatenate([s["exp_avg"].reshape(-1).numpy() for s in st]),
        np.concatenate([s["exp_avg_sq"].reshape(-1).numpy() for s in st]),
        np.array([float(s["step"]) for s in st]),
    )


@pytest.mark.parametrize("history", ["fresh", "warm", "uneven-steps"])
@pytest.mark.parametrize("method", [None, ExtraStream()], ids=["task", "two-streams"])
def test_whole_update_equals_the_torch_loop(history, method, maze_trainer):
    tr = maze_trainer(method, ent_coef=0.003)
    batch = tr.compute_advantages(tr.collect_rollout())
    if history != "fresh":
        tr.learner.ppo_update_torch(batch)
        batch = tr.compute_advantages(tr.collect_rollout())
    if history == "uneven-steps":  # a critic-only torch step (as CPO's critic update): the actor's Adam lags behind
        tr.learner.optimizer.zero_grad(set_to_none=True)
        tr.learner.critic_loss(batch, torch.arange(64)).backward()
        tr.learner.optimizer.step()
    snap = snapshot(tr)
    before = params_vector(tr)

    out_torch = tr.learner.ppo_update_torch(batch)
    after_torch, state_torch = params_vector(tr), adam_state(tr)
    restore(tr, snap)
    assert NumpyPPOUpdate.unsupported(tr.agent, tr.learner.optimizer, tr.streams) is None
    out_numpy = tr.learner.ppo_update(batch)
    after_numpy, state_numpy = params_vector(tr), adam_state(tr)

    d_torch, d_numpy = after_torch - before, after_numpy - before
    assert np.linalg.norm(d_torch) > 1e-3  # the update did something
    assert np.linalg.norm(d_numpy - d_torch) / np.linalg.norm(d_torch) < 1e-4
    np.testing.assert_allclose(state_numpy[0], state_torch[0], rtol=1e-3, atol=1e-7)
    np.testing.assert_allclose(state_numpy[1], state_torch[1], rtol=1e-3, atol=1e-10)
    np.testing.assert_array_equal(state_numpy[2], state_torch[2])
    assert out_numpy.keys() == out_torch.keys()
    for k in out_torch:
        assert out_numpy[k] == pytest.approx(out_torch[k], rel=1e-4, abs=1e-6), k
    # the torch optimiser carries on from the state the numpy update left
    tr.learner.optimizer.zero_grad(set_to_none=True)
    tr.learner.critic_loss(batch, torch.arange(64)).backward()
    tr.learner.optimizer.step()
    assert np.all(np.isfinite(params_vector(tr)))


def test_early_stop_on_target_kl_matches(maze_trainer):
    tr = maze_trainer(target_kl=1e-9)
    batch = tr.compute_advantages(tr.collect_rollout())
    snap = snapshot(tr)
    tr.learner.ppo_update_torch(batch)
    steps_torch = adam_state(tr)[2]
    restore(tr, snap)
    tr.learner.ppo_update(batch)
    steps_numpy = adam_state(tr)[2]
    np.testing.assert_array_equal(steps_numpy, steps_torch)
    assert steps_numpy[0] == tr.cfg.num_minibatches  # one epoch only


def test_falls_back_to_torch_with_a_warning_when_the_optimiser_is_not_adam(maze_trainer):
    tr = maze_trainer()
    tr.learner.optimizer = torch.optim.SGD(tr.agent.parameters(), lr=1e-3)
    assert "Adam" in NumpyPPOUpdate.unsupported(tr.agent, tr.learner.optimizer, tr.streams)
    batch = tr.compute_advantages(tr.collect_rollout())
    before = params_vector(tr)
    with pytest.warns(UserWarning, match="update_backend=numpy: the optimiser is not torch.optim.Adam"):
        out = tr.learner.ppo_update(batch)
    assert np.isfinite(out["losses/policy_loss"]) and not np.allclose(params_vector(tr), before)


def test_a_learner_that_overrides_critic_loss_gets_the_torch_update(maze_trainer):
    calls = []

    class OwnCriticLoss(Learner):
        def critic_loss(self, batch, mb, obs=None):
            calls.append(len(mb))
            return 2.0 * super().critic_loss(batch, mb, obs)

    tr = maze_trainer()
    tr.learner = OwnCriticLoss(tr.cfg, tr.agent, tr.streams)
    batch = tr.compute_advantages(tr.collect_rollout())
    with pytest.warns(UserWarning, match="update_backend=numpy: the learner overrides critic_loss"):
        tr.learner.ppo_update(batch)
    assert calls == [64] * tr.cfg.num_minibatches * tr.cfg.update_epochs  # the overridden loss trained the critic


def test_the_numpy_update_is_built_once_per_agent_and_optimiser(monkeypatch, maze_trainer):
    built = []
    original = NumpyPPOUpdate.__init__
    monkeypatch.setattr(NumpyPPOUpdate, "__init__", lambda self, *a: built.append(1) or original(self, *a))
    tr = maze_trainer()
    batch = tr.compute_advantages(tr.collect_rollout())
    tr.learner.ppo_update(batch)
    tr.learner.ppo_update(batch)
    assert len(built) == 1
    tr.learner.optimizer = torch.optim.Adam(tr.agent.parameters(), lr=1e-4, eps=1e-5)  # another optimiser: built for it
    tr.learner.ppo_update(batch)
    assert len(built) == 2 and tr.learner.optimizer.state[tr.agent.actor_logstd]["step"] == tr.cfg.num_minibatches * 3


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_update_backend_selects_the_update(monkeypatch, backend, maze_trainer):
    tr = maze_trainer(update_backend=backend)
    batch = tr.compute_advantages(tr.collect_rollout())
    calls = []
    monkeypatch.setattr(NumpyPPOUpdate, "run", lambda self, *a: calls.append("numpy") or {})
    monkeypatch.setattr(Learner, "ppo_update_torch", lambda self, *a: calls.append("torch") or {})
    tr.learner.ppo_update(batch)
    assert calls == [backend]


def test_an_unknown_update_backend_is_refused():
    with pytest.raises(NpscoError, match="update_backend must be numpy or torch, not 'jax'"):
        PPOConfig(update_backend="jax").validate()


def test_the_update_runs_numpys_blas_with_torch_threads_and_restores_it(monkeypatch, maze_trainer):
    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    if not blas_threads():
        pytest.skip("numpy's BLAS is not one that threadpoolctl controls")
    seen = []
    original = NumpyPPOUpdate._run
    monkeypatch.setattr(NumpyPPOUpdate, "_run", lambda self, *a: seen.append(blas_threads()) or original(self, *a))
    tr = maze_trainer(torch_threads=1)
    batch = tr.compute_advantages(tr.collect_rollout())
    with threadpool_limits(2, user_api="blas"):
        tr.learner.ppo_update(batch)
        assert blas_threads() == [2] * len(blas_threads())
    assert seen == [[1] * len(seen[0])]
    assert numpy_update._blas() is numpy_update._blas()  # the libraries are looked up once
