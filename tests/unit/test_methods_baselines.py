"""The paper's baselines on the shared PPO core: WSR's shaped reward, TNB's bisector update, CTNB's per-iteration
switch, and CPO's trust-region step, each checked on a tiny maze batch (4 envs x 16 steps)."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch.distributions import Normal, kl_divergence

from npsco.errors import NpscoError
from npsco.methods import make_method
from npsco.methods.base import Method, MethodContext
from npsco.methods.constrained import bisector, flat_grad, get_flat_params
from npsco.methods.cpo import CPO, novelty_cost
from npsco.methods.cpo_problem import CPOProblem
from npsco.methods.settings import MethodConfig
from npsco.methods.tnb import CTNB, TNB, ctnb_violated
from npsco.methods.wsr import WSR, wsr_shape
from npsco.novelty.references import ReferenceSet
from npsco.ppo.trainer import Trainer
from npsco.tasks import MAZE_ID
from oracles.cpo import TorchCPOProblem, direct_cost, gaussian_kl
from oracles.torch_learner import TorchLearner, normalize_advantages, policy_loss
from oracles.torch_update import torch_update


@pytest.fixture
def tiny_trainer(tiny_maze):
    """`tiny_trainer(method, r0=0.1, num_steps=16, **knobs)`: a maze trainer (seed 0, plain gradients: no reward
    scaling, no clipping) with `method` against one randomly initialised reference (seed 7)."""

    def make(method: str, r0: float = 0.1, num_steps: int = 16, **knobs) -> Trainer:
        cfg = tiny_maze(
            num_steps=num_steps,  # at least one batch
            total_timesteps=max(64, 4 * num_steps),
            scale_reward=False,
            max_grad_norm=1e9,
        )
        maker = Trainer(dataclasses.replace(cfg, seed=7), tensorboard=False)
        reference = maker.policy()
        maker.envs.close()
        config = MethodConfig.of(method, **knobs)
        return Trainer(
            cfg, make_method(config, MethodContext(MAZE_ID, ReferenceSet([reference]), r0)), tensorboard=False
        )

    return make


@pytest.fixture(scope="module", autouse=True)
def _import_torch_optimisers():
    """The first torch optimiser imports torch._dynamo (seconds); pay that once, in setup, not in the first test."""
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


def rollout_batch(trainer: Trainer):
    return trainer.compute_advantages(trainer.collect_rollout())


def flat(params) -> torch.Tensor:
    return get_flat_params(params).clone()


# ------------------------------------------------------------------------------------------------------ registry
def test_make_method_builds_each_baseline_and_validates_its_knobs(tiny_trainer):
    trainer = tiny_trainer("wsr")
    refs = trainer.hooks.references
    for name, cls in (("wsr", WSR), ("tnb", TNB), ("ctnb", CTNB), ("cpo", CPO)):
        method = make_method(MethodConfig.of(name), MethodContext(MAZE_ID, refs, 0.1))
        assert type(method) is cls and method.name == name
    assert type(make_method(MethodConfig.of("ppo"), MethodContext(MAZE_ID, refs, None))) is Method
    assert MethodConfig.of("tnb").options.tnb_rule == "authors"
    for rule in ("authors", "paper_eq5", "safe", "paper"):  # `paper`: the name of paper_eq5 in older runs
        MethodConfig.of("tnb", tnb_rule=rule).validate()
    for method, bad, message in (
        ("tnb", dict(tnb_rule="sum"), "tnb_rule must be one of"),
        ("ctnb", dict(ctnb_slack=-1.0), "ctnb_slack must be >= 0"),
        ("cpo", dict(cpo_max_kl=0.0), "cpo_max_kl must be > 0"),
        ("cpo", dict(cpo_damping=0.0), "cpo_damping must be > 0"),
        ("cpo", dict(cpo_cg_iters=0), "cpo_cg_iters must be > 0"),
        ("cpo", dict(cpo_backtrack_iters=0), "cpo_backtrack_iters must be > 0"),
        ("cpo", dict(cpo_backtrack_coef=1.0), "cpo_backtrack_coef must be in"),
    ):
        with pytest.raises(NpscoError, match=message):
            MethodConfig.of(method, **bad).validate()


# ----------------------------------------------------------------------------------------------------------- WSR
def test_wsr_shapes_on_exact_numbers():
    u = np.array([0.0, 1.0, math.log(2.0)])
    np.testing.assert_allclose(wsr_shape(u, "linear"), [0.0, 1.0, math.log(2.0)], rtol=0, atol=1e-15)
    np.testing.assert_allclose(wsr_shape(u, "exp"), [1.0, math.e, 2.0], rtol=1e-15)
    np.testing.assert_allclose(wsr_shape(u, "neg_exp"), [-1.0, -1.0 / math.e, -0.5], rtol=1e-15)
    with pytest.raises(ValueError):
        wsr_shape(u, "square")


@pytest.mark.parametrize("shape, u, bonus", [("linear", 0.5, 5.0), ("exp", 0.0, 10.0), ("neg_exp", 0.0, -10.0)])
def test_wsr_trains_on_task_reward_plus_bonus_but_reports_the_task_return(shape, u, bonus, tiny_trainer):
    trainer = tiny_trainer("wsr", num_steps=128, wsr_shape=shape)  # maze default weight 10; 100-step episodes
    method = trainer.hooks
    method.tracker.run = lambda d, done: np.full(done.shape, u)  # a known running novelty
    task_rewards = []
    shape_rollout = method.shape_rollout
    method.shape_rollout = lambda steps: (task_rewards.extend(steps.reward.copy()), shape_rollout(steps))[1]

    buf = trainer.collect_rollout()
    np.testing.assert_allclose(buf.rewards["task"], np.array(task_rewards) + bonus, rtol=1e-6)
    # the reported returns are the task rewards' sums, episode by episode, without the bonus
    expected, running = [], np.zeros(4)
    for reward, done in zip(task_rewards, buf.done, strict=True):
        running += reward
        expected.extend(running[done].tolist())
        running[done] = 0.0
    assert len(expected) >= 4 and buf.summary.returns == pytest.approx(expected)
    assert method.iteration_metrics(buf.summary)["wsr/bonus_mean"] == pytest.approx(bonus)


# ----------------------------------------------------------------------------------------------------------- TNB
def tnb_expected(trainer: Trainer, batch, rule: str = "authors"):
    """Independently computed p = bisector(f, g) on the whole batch and the critics' gradient."""
    agent, cfg = trainer.agent, trainer.cfg
    logprob, _, _ = agent.evaluate(batch.obs, batch.actions)
    losses = [
        policy_loss(logprob, batch.logprobs, normalize_advantages(batch.advantages[s]), cfg.clip_coef)[0]
        for s in ("task", "novelty")
    ]
    f = -flat_grad(losses[0], agent.actor_parameters(), retain_graph=True)
    g = -flat_grad(losses[1], agent.actor_parameters())
    all_mb = torch.arange(batch.size)
    critic_loss = TorchLearner(trainer.learner).critic_loss(batch, all_mb)
    critic_grad = flat_grad(cfg.vf_coef * critic_loss, agent.critic_parameters())
    return f, g, bisector(f, g, rule), critic_grad


def sgd_update(trainer: Trainer, batch, lr: float = 0.1):
    """Run the method's update in torch (`torch_update`, the reference the numpy update is held against in
    test_fast_methods.py) with plain SGD; returns (actor change, critic change, metrics)."""
    agent = trainer.agent
    trainer.learner.optimizer = torch.optim.SGD(agent.parameters(), lr=lr)
    actor0, critic0 = flat(agent.actor_parameters()), flat(agent.critic_parameters())
    out = torch_update(trainer.hooks, trainer.learner, batch)
    return flat(agent.actor_parameters()) - actor0, flat(agent.critic_parameters()) - critic0, out


@pytest.mark.parametrize("rule", ["authors", "safe", "paper_eq5"])
def test_tnb_moves_the_actor_along_the_bisector_and_the_critics_on_their_own_losses(rule, tiny_trainer):
    trainer = tiny_trainer("tnb", tnb_rule=rule)
    batch = rollout_batch(trainer)
    f, g, p, critic_grad = tnb_expected(trainer, batch, rule)
    d_actor, d_critic, out = sgd_update(trainer, batch, lr=0.1)
    np.testing.assert_allclose(d_actor.numpy(), 0.1 * p.numpy(), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(d_critic.numpy(), -0.1 * critic_grad.numpy(), rtol=1e-4, atol=1e-7)
    novelty_critic = flat(trainer.agent.critics["novelty"].parameters())
    assert novelty_critic.abs().sum() > 0 and critic_grad.abs().sum() > 0
    assert out["tnb/cos"] == pytest.approx(float(f @ g / (f.norm() * g.norm())), abs=1e-5)
    assert out["tnb/obtuse_frac"] == float(out["tnb/cos"] <= 0)


@pytest.mark.parametrize("rule, along_task", [("authors", 0.0), ("safe", -1.0), ("paper_eq5", 2.0)])
def test_tnb_with_known_antiparallel_gradients(rule, along_task, tiny_trainer):
    """Novelty advantages = -task advantages make g = -f exactly: the authors' rule has no task gradient left once
    made orthogonal to g (p = 0), the safe rule follows novelty (p = g = -f), the paper's Eq. 5 subtracts cos g = f
    (p = 2 f)."""
    trainer = tiny_trainer("tnb", tnb_rule=rule)
    batch = rollout_batch(trainer)
    batch.advantages["novelty"] = -batch.advantages["task"]
    f, g, _, _ = tnb_expected(trainer, batch, rule)
    np.testing.assert_allclose(g.numpy(), -f.numpy(), rtol=1e-5, atol=1e-8)
    d_actor, _, out = sgd_update(trainer, batch, lr=0.1)
    np.testing.assert_allclose(d_actor.numpy(), 0.1 * along_task * f.numpy(), rtol=1e-4, atol=1e-7)
    assert out["tnb/cos"] == pytest.approx(-1.0, abs=1e-5) and out["tnb/obtuse_frac"] == 1.0


# ---------------------------------------------------------------------------------------------------------- CTNB
def test_ctnb_violation_rule_on_exact_numbers():
    assert ctnb_violated(-1.0, 10, 0.0)  # mean margin -0.1 < 0
    assert not ctnb_violated(-1.0, 10, 0.2)  # ... but not below -0.2
    assert not ctnb_violated(0.0, 10, 0.0)  # exactly on the threshold: satisfied
    assert not ctnb_violated(2.0, 5, 0.0)
    assert not ctnb_violated(0.0, 0, 0.0)  # no step after t_S: nothing to violate


def test_ctnb_takes_the_plain_ppo_step_when_the_constraint_holds(tiny_trainer):
    trainer = tiny_trainer("ctnb", r0=1e-6)  # every running novelty is above a tiny r0
    batch = rollout_batch(trainer)
    agent = trainer.agent
    start = (
        {k: v.clone() for k, v in agent.state_dict().items()},
        trainer.learner.optimizer.state_dict(),
        trainer.learner.torch_rng.get_state(),
    )  # (the minibatches come from the trainer's generator)
    out = trainer.hooks.update(trainer.learner, batch)
    after_ctnb = flat(agent.parameters())
    agent.load_state_dict(start[0])
    trainer.learner.optimizer.load_state_dict(start[1])
    trainer.learner.torch_rng.set_state(start[2])
    trainer.learner.ppo_update(batch)
    assert out["ctnb/constraint_active"] == 0.0 and out["ctnb/margin_mean"] > 0 and "tnb/cos" not in out
    assert torch.equal(after_ctnb, flat(agent.parameters()))


def test_ctnb_takes_the_bisector_step_when_the_constraint_is_violated(tiny_trainer):
    # r0 above any maze action distance (<= 2 sqrt 2): always violated
    trainer = tiny_trainer("ctnb", r0=5.0)
    batch = rollout_batch(trainer)
    _, _, p, _ = tnb_expected(trainer, batch)
    d_actor, _, out = sgd_update(trainer, batch, lr=0.1)
    assert out["ctnb/constraint_active"] == 1.0 and out["ctnb/margin_mean"] < -2.0 and "tnb/cos" in out
    np.testing.assert_allclose(d_actor.numpy(), 0.1 * p.numpy(), rtol=1e-4, atol=1e-7)
    # the margins are reset for the next iteration
    assert (trainer.hooks._margin_sum, trainer.hooks._active_steps) == (0.0, 0)


# ----------------------------------------------------------------------------------------------------------- CPO
def test_novelty_cost_and_gaussian_kl_on_exact_numbers():
    d = np.array([[0.5, 0.2], [1.0, 3.0]])
    np.testing.assert_allclose(novelty_cost(d, 0.4), [0.2, -0.6], rtol=1e-6)
    mean_p, mean_q = torch.tensor([[0.0, 1.0], [2.0, -1.0]]), torch.tensor([[0.5, 1.0], [0.0, 0.0]])
    log_std_p, log_std_q = torch.tensor([[0.0, -0.5]]), torch.tensor([[0.3, 0.1]])
    expected = kl_divergence(Normal(mean_p, log_std_p.exp()), Normal(mean_q, log_std_q.exp())).sum(-1)
    torch.testing.assert_close(gaussian_kl(mean_p, log_std_p, mean_q, log_std_q), expected)
    # one dimension by hand: p = N(0, 1), q = N(1, e^2): log e + (1 + 1) / (2 e^2) - 1/2
    by_hand = 1.0 + 1.0 / math.e**2 - 0.5
    assert gaussian_kl(
        torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1)
    ).item() == pytest.approx(by_hand, rel=1e-6)


def measured_kl(trainer: Trainer, batch, old_mean: torch.Tensor, old_log_std: torch.Tensor) -> float:
    with torch.no_grad():
        new = Normal(trainer.agent.actor_mean(batch.obs), trainer.agent.actor_logstd.exp())
        return kl_divergence(Normal(old_mean, old_log_std.exp()), new).sum(-1).mean().item()


def cpo_step_on_tiny_batch(tiny_trainer, r0: float, problem_class=TorchCPOProblem, **knobs):
    """The CPO step of a tiny batch, its problem in `problem_class` (torch or numpy); the measurements in torch."""
    trainer = tiny_trainer("cpo", r0=r0, **knobs)
    batch = rollout_batch(trainer)
    cost = trainer.hooks._cost_sum / trainer.hooks._cost_n
    with torch.no_grad():
        old_mean, old_log_std = trainer.agent.actor_mean(batch.obs), trainer.agent.actor_logstd.clone()
    direct = trainer.hooks.direct_cost()
    problem = TorchCPOProblem(trainer.agent, batch, True, 0.1, direct)
    with torch.no_grad():
        before = [s.item() for s in problem.surrogates()]
    out = trainer.hooks.policy_step(problem_class(trainer.agent, batch, True, 0.1, direct), cost)
    with torch.no_grad():
        after = [s.item() for s in problem.surrogates()]
    return out, measured_kl(trainer, batch, old_mean, old_log_std), before, after, cost


@pytest.mark.parametrize("problem_class", [TorchCPOProblem, CPOProblem], ids=["torch", "numpy"])
def test_cpo_feasible_step_stays_in_the_trust_region_and_improves_the_surrogate(problem_class, tiny_trainer):
    # cost ~ -d < 0: feasible
    out, kl, before, after, cost = cpo_step_on_tiny_batch(tiny_trainer, r0=1e-6, problem_class=problem_class)
    assert cost < 0 and out["cpo/case"] in (2.0, 3.0) and out["cpo/step_accepted"] == 1.0
    assert 0 < kl <= 0.01 * (1 + 1e-4) and out["cpo/kl"] == pytest.approx(kl, rel=1e-3)
    assert before[0] == pytest.approx(0.0, abs=1e-5)  # normalised advantages at the old policy
    assert after[0] > before[0] and out["cpo/surrogate_change"] == pytest.approx(after[0] - before[0], rel=1e-3)


@pytest.mark.parametrize("problem_class", [TorchCPOProblem, CPOProblem], ids=["torch", "numpy"])
def test_cpo_infeasible_step_decreases_the_cost_surrogate_within_the_kl_bound(problem_class, tiny_trainer):
    # c = 5 - d > 0: infeasible
    out, kl, before, after, cost = cpo_step_on_tiny_batch(tiny_trainer, 5.0, problem_class, cpo_max_kl=0.02)
    assert cost > 2.0 and out["cpo/case"] in (0.0, 1.0) and out["cpo/step_accepted"] == 1.0
    assert kl <= 0.02 * (1 + 1e-4)
    assert after[1] < before[1] and out["cpo/cost_surrogate_change"] < 0
    if out["cpo/case"] == 0.0:  # recovery: x = -nu F^-1 b, lambda = 0
        assert out["cpo/lambda"] == 0.0 and out["cpo/nu"] > 0


@pytest.mark.parametrize("knobs", [{}, {"novelty_action": "sample", "metric": "wasserstein2"}])
def test_cpo_direct_cost_is_the_batch_cost_as_a_function_of_the_policy(knobs, tiny_trainer):
    trainer = tiny_trainer("cpo", r0=0.3, **knobs)
    with torch.no_grad():
        trainer.agent.actor_logstd.fill_(-0.3)  # the reference's is 0: the std term has a gradient
    batch = rollout_batch(trainer)
    direct = direct_cost(trainer.hooks.direct_cost(), trainer.agent.actor_mean(batch.obs), trainer.agent.actor_logstd)
    assert direct.item() == pytest.approx(trainer.hooks._cost_sum / trainer.hooks._cost_n, abs=1e-5)
    grad = flat_grad(direct, trainer.agent.actor_parameters())
    n_logstd = trainer.agent.actor_logstd.numel()
    # mean: through the policy's own mean action; sample + wasserstein2: only through the std
    assert grad[:-n_logstd].abs().sum() > 0 if not knobs else grad[:-n_logstd].abs().sum() == 0
    assert (grad[-n_logstd:].abs().sum() > 0) == bool(knobs)


def test_cpo_update_logs_the_batch_cost_and_trains_only_the_critics_with_adam(tiny_trainer):
    trainer = tiny_trainer("cpo", r0=0.3)
    batch = rollout_batch(trainer)
    costs = trainer.hooks._cost_sum / trainer.hooks._cost_n
    actor_before = flat(trainer.agent.actor_parameters())
    critics_before = flat(trainer.agent.critic_parameters())
    out = trainer.learner.fit_critics(batch)
    assert torch.equal(flat(trainer.agent.actor_parameters()), actor_before)
    assert not torch.equal(flat(trainer.agent.critic_parameters()), critics_before) and out["losses/value_loss"] > 0
    full = trainer.hooks.update(trainer.learner, batch)
    assert full["cpo/cost"] == pytest.approx(costs)
    assert {"cpo/case", "cpo/kl", "cpo/step_accepted", "cpo/lambda", "cpo/nu", "losses/value_loss"} <= set(full)
    assert all(math.isfinite(v) for v in full.values())


def test_cpo_cost_stream_is_centred_on_the_previous_batch_cost(tiny_trainer):
    trainer = tiny_trainer("cpo", r0=0.3)
    method = trainer.hooks
    method.update(trainer.learner, rollout_batch(trainer))
    first = method.cost_center
    buf = trainer.collect_rollout()
    second = method._cost_sum / method._cost_n  # J_C of this batch, uncentred
    assert first is not None and second != pytest.approx(first)
    assert buf.rewards["cost"].mean() == pytest.approx(second - first, abs=1e-5)
