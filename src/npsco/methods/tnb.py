"""Task-Novelty Bisector (TNB, Zhang et al. 2019; paper Sec. 3.4) and its constrained variant CTNB (paper Alg. 2).

Both add a novelty reward stream r_nov,t = u_t - r0 (u_t the episode's running novelty, as the authors' code) with its
own critic, GAE and advantage normalisation. Per minibatch, the task PPO surrogate L_task and the novelty PPO
surrogate L_nov give two ascent directions on the **actor parameters** theta (mean MLP and log-std):

    f = -grad_theta L_task(clip),   g = -grad_theta L_nov(clip),   p = bisector(f, g, rule)

and one Adam step follows the gradient -p on theta (plus PPO's entropy bonus), while the critics follow the gradients
of their own value losses (times vf_coef); the global gradient norm is clipped as PPO does. Each minibatch is a step
(`bisector_step`) of the learner's epochs (`Learner.numpy_learner`): two numpy backward passes of the actor give f and
g, and the learner takes -p as the actor's gradient (`NumpyLearner.set_actor_direction`).

TNB always uses the bisector. CTNB decides once per iteration (per batch) from the rollout: with the margins
m_t = u_t - r0 of the batch's steps with t > t_S, the constraint is violated when mean(m_t) < -ctnb_slack; then the
update is TNB's, else it is plain PPO (`Learner.ppo_update`, whose critic loss still trains the novelty critic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from npsco.errors import NpscoError
from npsco.methods.constrained import TNB_RULES, bisector_np, norm
from npsco.methods.novelty import NoveltyMethod
from npsco.ppo.fast_update import Minibatch, NumpyLearner, Stats, mean_stats
from npsco.ppo.hooks import RolloutShaping, RolloutSteps, TrainingSetup
from npsco.ppo.learner import Learner
from npsco.ppo.numpy_nets import clipped_surrogate, gaussian_entropy, logprob_backward, normalized
from npsco.ppo.rollout import Batch


@dataclass
class TNBOptions:
    """TNB's own settings."""

    tnb_rule: str = "authors"
    """The combination of the task gradient f and the novelty gradient g (`npsco.methods.constrained.bisector`), in
    the same direction for an acute angle (their bisector); for an obtuse one: `authors` (the authors' code: f made
    orthogonal to g, neutral for novelty), `paper_eq5` (Eq. 5 as printed, a step against novelty; `paper` in older
    runs) or `safe` (the default until 2026-11-26: f made orthogonal to g, then bisected with g)."""

    def validate(self) -> None:
        if self.tnb_rule not in (*TNB_RULES, "paper"):
            raise NpscoError(f"invalid method configuration: tnb_rule must be one of {', '.join(TNB_RULES)}")


@dataclass
class CTNBOptions(TNBOptions):
    """CTNB's own settings: TNB's, and when its constraint counts as violated."""

    ctnb_slack: float = 0.0
    """An iteration's constraint counts as violated (bisector step; else a plain PPO step) when the mean of
    (u_t - r0) over the batch's steps with t > t_S is < -ctnb_slack."""

    def validate(self) -> None:
        super().validate()
        if self.ctnb_slack < 0:
            raise NpscoError("invalid method configuration: ctnb_slack must be >= 0")


def ctnb_violated(margin_sum: float, active_steps: int, slack: float) -> bool:
    """CTNB's per-iteration test: mean of (u_t - r0) over the batch's steps with t > t_S < -slack.

    `margin_sum` is the sum of u_t - r0 over those `active_steps` steps; with none (every episode shorter than t_S)
    the constraint is not violated. The authors' code tested sum < -0.1 instead: the same as ours with slack
    0.1 / active_steps, i.e. about 0 for batches of thousands of steps.
    """
    return active_steps > 0 and margin_sum / active_steps < -slack


class TNB(NoveltyMethod):
    """PPO whose actor steps along the bisector of the task and novelty surrogate gradients.

    Logs `tnb/cos` (mean over minibatches of the cosine between f and g), `tnb/obtuse_frac` (fraction of minibatches
    with cos <= 0), `losses/novelty_policy_loss`, and the usual `losses/*` (the value loss sums both critics')."""

    name = "tnb"
    Options = TNBOptions
    streams = ("novelty",)

    def shape_rollout(self, steps: RolloutSteps) -> RolloutShaping:
        _, u, _ = self.rollout_novelty(steps)
        return RolloutShaping(streams={"novelty": (u - self.r0).astype(np.float32)})

    def update(self, learner: Learner, batch: Batch) -> dict[str, float]:
        fast = learner.numpy_learner()
        return self.metrics(fast.run_epochs(batch, lambda mb: self.bisector_step(fast, mb), ("task", "novelty")))

    @staticmethod
    def metrics(stats: Sequence[Stats]) -> dict[str, float]:
        """The update's metrics from its minibatches' statistics (`bisector_step`'s)."""
        means = mean_stats(stats)
        names = {
            "policy_loss": "losses/policy_loss",
            "novelty_policy_loss": "losses/novelty_policy_loss",
            "value_loss": "losses/value_loss",
            "entropy": "losses/entropy",
            "approx_kl": "losses/approx_kl",
            "clipfrac": "losses/clipfrac",
            "cos": "tnb/cos",
        }
        out = {name: means[k] for k, name in names.items()}
        out["tnb/obtuse_frac"] = float(np.mean(np.array([float(row["cos"]) for row in stats]) <= 0))
        return out

    def bisector_step(self, fast: NumpyLearner, mb: Minibatch) -> Stats:
        """The gradients of minibatch `mb`, a step of `NumpyLearner.run_epochs`: f and g by two backward passes of
        the actor, the actor's along -p with p = bisector(f, g) plus the entropy bonus's on the log-std, the critics'
        of their value losses; returns the minibatch's statistics."""
        cfg = fast.cfg
        actor = fast.actor_pass(mb)
        adv_task, adv_nov = mb.advantages["task"], mb.advantages["novelty"]
        if cfg.norm_adv:
            adv_task, adv_nov = normalized(adv_task), normalized(adv_nov)
        task = clipped_surrogate(actor.logprob, mb.logprobs, adv_task, cfg.clip_coef)
        nov = clipped_surrogate(actor.logprob, mb.logprobs, adv_nov, cfg.clip_coef)
        f = -fast.actor_backward(actor.acts, *logprob_backward(actor, task.g_logprob))
        g = -fast.actor_backward(actor.acts, *logprob_backward(actor, nov.g_logprob))
        p = bisector_np(f, g, rule=self.config.options.tnb_rule)
        fast.set_actor_direction(p)
        v_loss = fast.critics_backward(mb)
        return {
            "policy_loss": task.loss,
            "novelty_policy_loss": nov.loss,
            "value_loss": v_loss,
            "entropy": gaussian_entropy(fast.log_std[0]),
            "approx_kl": task.approx_kl,
            "clipfrac": task.clipfrac,
            "cos": np.dot(f, g) / (norm(f) * norm(g) + np.float32(1e-12)),
        }


class CTNB(TNB):
    """TNB's bisector step only in iterations whose batch violates the constraint (`ctnb_violated`), else plain PPO.

    Logs `ctnb/constraint_active` (1 if the bisector was used this iteration, else 0) and `ctnb/margin_mean` (the mean
    of u_t - r0 over the batch's steps with t > t_S); `tnb/*` only in iterations with the bisector."""

    name = "ctnb"
    Options = CTNBOptions

    def bind(self, setup: TrainingSetup) -> None:
        super().bind(setup)
        self._margin_sum, self._active_steps = 0.0, 0

    def shape_rollout(self, steps: RolloutSteps) -> RolloutShaping:
        out = super().shape_rollout(steps)
        constrained = steps.episode_step > self.t_start
        self._margin_sum = float(out.streams["novelty"][constrained].sum())
        self._active_steps = int(constrained.sum())
        return out

    def update(self, learner: Learner, batch: Batch) -> dict[str, float]:
        violated = ctnb_violated(self._margin_sum, self._active_steps, self.config.options.ctnb_slack)
        out = super().update(learner, batch) if violated else learner.ppo_update(batch)
        out["ctnb/constraint_active"] = float(violated)
        if self._active_steps:
            out["ctnb/margin_mean"] = self._margin_sum / self._active_steps
        self._margin_sum, self._active_steps = 0.0, 0
        return out
