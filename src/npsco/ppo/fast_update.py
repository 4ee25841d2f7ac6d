"""The learner's minibatch epochs in numpy (`NumpyLearner`), the update npsco trains with (its torch reference is
the tests' oracle, tests/oracles/torch_learner.py): forward and backward passes written out (`npsco.ppo.numpy_nets`),
the global-norm clip and Adam on one flat float32 vector. It runs PPO's update (`ppo_step`), the critics' fit
(`critics_step`) and a method's own minibatch gradients (TNB's bisector step), each a step function of the one loop
`run_epochs`.

Why: the update of these small networks is bound by per-operation overhead, not arithmetic; torch spends several
times the CPU time of this version per minibatch (autograd graph, dispatched kernels, optimiser bookkeeping;
benchmarks/results/throughput/throughput.md, benchmarks/results/throughput/design_measurements.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from threadpoolctl import ThreadpoolController
from torch import nn

from npsco.ppo._update_kernels import adam_step, advance_steps
from npsco.ppo.agent import ActorCritic
from npsco.ppo.config import PPOConfig
from npsco.ppo.numpy_nets import (
    GaussianPass,
    clipped_surrogate,
    gaussian_entropy,
    gaussian_pass,
    logprob_backward,
    mlp_backward,
    mlp_forward,
    normalized,
    value_loss_and_grad,
)
from npsco.ppo.rollout import Batch, MeanActionTerm

Stats = dict[str, Any]
"""A minibatch step's statistics: name -> a float (or numpy scalar); `approx_kl` enables the target-KL stop."""


@functools.cache
def _blas() -> ThreadpoolController:
    """The BLAS libraries loaded in this process (found once: the search walks the loaded libraries)."""
    return ThreadpoolController()


def _mlp_linears(module: nn.Module) -> list[nn.Linear] | None:
    """The Linear layers of a `policy.mlp` (Linear, Tanh, ..., Linear), or None for any other structure."""
    if not isinstance(module, nn.Sequential):
        return None
    layers = list(module)
    if not layers or len(layers) % 2 == 0:
        return None
    for i, m in enumerate(layers):
        if type(m) is not (nn.Linear if i % 2 == 0 else nn.Tanh):
            return None
    return cast(list[nn.Linear], layers[::2])


def _linears(module: nn.Module) -> list[nn.Linear]:
    """`_mlp_linears`, for a module that `NumpyLearner.unsupported` accepted."""
    linears = _mlp_linears(module)
    if linears is None:
        raise ValueError("NumpyLearner needs tanh MLPs (see NumpyLearner.unsupported)")
    return linears


@dataclass
class Minibatch:
    """Rows of a `Batch` as numpy arrays, its fields as there: what a numpy step gets."""

    index: np.ndarray
    """The rows' indices in the batch, (B,)."""
    obs: np.ndarray
    actions: np.ndarray
    logprobs: np.ndarray
    advantages: dict[str, np.ndarray]
    """Only those of the streams the update asked for."""
    values: dict[str, np.ndarray]
    returns: dict[str, np.ndarray]

    @classmethod
    def of(cls, batch: Batch, advantages: Sequence[str], streams: Sequence[str]) -> Minibatch:
        """The whole `batch` (numpy views of its tensors), with the advantages of `advantages`."""
        return cls(
            np.arange(batch.size),
            batch.obs.detach().numpy(),
            batch.actions.detach().numpy(),
            batch.logprobs.detach().numpy(),
            {s: batch.advantages[s].detach().numpy() for s in advantages},
            {s: batch.values[s].detach().numpy() for s in streams},
            {s: batch.returns[s].detach().numpy() for s in streams},
        )

    def select(self, rows: np.ndarray | slice) -> Minibatch:
        """The rows `rows` (indices, gathered; or a slice, as views)."""
        return Minibatch(
            self.index[rows],
            self.obs[rows],
            self.actions[rows],
            self.logprobs[rows],
            {s: a[rows] for s, a in self.advantages.items()},
            {s: a[rows] for s, a in self.values.items()},
            {s: a[rows] for s, a in self.returns.items()},
        )


NumpyStep = Callable[[Minibatch], Stats]
"""Computes the gradients of one minibatch into `NumpyLearner.grad` and returns its statistics."""


def mean_stats(rows: Sequence[Stats]) -> dict[str, float]:
    """Each statistic's mean over the minibatches (in float64; a statistic may be a float, a numpy scalar or a 0-d
    tensor)."""
    names = list(rows[0])
    means = np.mean([[float(row[k]) for k in names] for row in rows], axis=0)
    return {k: float(v) for k, v in zip(names, means, strict=True)}


class NumpyLearner:
    """`Learner`'s minibatch epochs in numpy: the agent's parameters and their Adam state on flat float32 vectors, a
    loop `run_epochs(batch, step)` that computes each minibatch's gradients by `step`, clips their global norm and
    takes Adam's step, and the steps of PPO (`ppo_step`) and of the critics' fit (`critics_step`), built from pieces a
    method's own step can use too (`actor_pass`, `actor_backward`, `critics_backward`).

    It computes what the torch loop computes, step for step: the same minibatches (drawn by the learner's
    `minibatches`, from its own generator), advantage normalisation with the unbiased std, the clipped surrogate and
    the (clipped) value losses with torch's gradient conventions at the kinks, the entropy bonus, `clip_grad_norm_`
    (max_norm / (norm + 1e-6), only when below 1) and Adam as `torch.optim.Adam` (bias-corrected, eps added after the
    square root). The Adam moments and step counts are read from and written back to the torch optimiser, so torch
    and numpy steps can mix and keep one consistent Adam. The differences are float32 rounding (summation order in the
    matmuls): tests/unit/test_fast_update.py and tests/unit/test_fast_methods.py check the gradients and whole
    updates against the torch loop.

    It needs npsco's `ActorCritic` (tanh MLPs built by `policy.mlp`, float32) and a plain `torch.optim.Adam` with
    one parameter group (no weight decay, amsgrad, maximize); `unsupported` names the first condition that fails.
    """

    @staticmethod
    def unsupported(agent: nn.Module, optimizer: torch.optim.Optimizer, streams: tuple[str, ...]) -> str | None:
        """Why this learner cannot run on `agent` and `optimizer` (training `streams`), or None when it can."""
        if type(agent) is not ActorCritic:
            return "the agent is not npsco's ActorCritic"
        nets = [agent.actor_mean, *(agent.critics[s] for s in streams)]
        if any(_mlp_linears(net) is None for net in nets):
            return "a network is not a tanh MLP"
        if type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1:
            return "the optimiser is not torch.optim.Adam with one parameter group"
        group = optimizer.param_groups[0]
        if group["weight_decay"] or group["amsgrad"] or group["maximize"] or torch.is_tensor(group["lr"]):
            return "Adam options (weight decay, amsgrad, maximize, tensor lr) are not supported"
        in_group = {id(p) for p in group["params"]}
        if any(p.dtype != torch.float32 or id(p) not in in_group for p in agent.parameters()):
            return "parameters are not all float32 and in the optimiser"
        return None

    def __init__(
        self,
        cfg: PPOConfig,
        agent: ActorCritic,
        optimizer: torch.optim.Adam,
        streams: tuple[str, ...],
        minibatches: Callable[[], Sequence[torch.Tensor]],
    ):
        self.cfg, self.agent, self.optimizer, self.streams = cfg, agent, optimizer, streams
        self.minibatches = minibatches
        """Draws the index tensors of one epoch's minibatches (the learner's own generator)."""
        actor = _linears(agent.actor_mean)
        critics = {s: _linears(agent.critics[s]) for s in streams}
        # The parameters that get gradients: the actor, the log-std and the critics of the trained streams (a critic
        # outside the streams gets no gradient in the torch loop either, so Adam leaves it alone).
        self.params: list[torch.Tensor] = [t for lin in actor for t in (lin.weight, lin.bias)] + [agent.actor_logstd]
        for s in streams:
            self.params += [t for lin in critics[s] for t in (lin.weight, lin.bias)]
        sizes = [p.numel() for p in self.params]
        self.offsets = np.cumsum([0, *sizes])
        n = int(self.offsets[-1])
        self.flat = np.empty(n, np.float32)  # parameters
        self.grad = np.zeros(n, np.float32)
        self.exp_avg = np.empty(n, np.float32)
        self.exp_avg_sq = np.empty(n, np.float32)
        self._step_size, self._bc2_sqrt = np.empty(1, np.float32), np.empty(1, np.float32)  # Adam's, when uniform
        self._adam_constants: tuple[tuple[float, float, float], tuple[np.float32, ...]] | None = None
        """(beta1, beta2, eps) and their float32 forms for `adam_step` (b1, 1 - b1, b2, 1 - b2, eps)."""
        self.steps = np.empty(len(self.params), np.float64)
        views = [self._view(buf) for buf in (self.flat, self.grad)]
        k = 2 * len(actor)
        self.critic_start = k + 1
        """Index in `params` of the first critic parameter: the actor's (mean MLP, then log-std) come first."""
        self.actor_size = int(self.offsets[self.critic_start])
        """Length of the actor's part of the flat vectors (laid out as `ActorCritic.actor_parameters`)."""
        self.actor = list(zip(views[0][0:k:2], views[0][1:k:2], strict=True))
        self.actor_grad = list(zip(views[1][0:k:2], views[1][1:k:2], strict=True))
        self.log_std, self.log_std_grad = views[0][k], views[1][k]
        self.critics, self.critics_grad, start = {}, {}, k + 1
        for s in streams:
            end = start + 2 * len(critics[s])
            self.critics[s] = list(zip(views[0][start:end:2], views[0][start + 1 : end : 2], strict=True))
            self.critics_grad[s] = list(zip(views[1][start:end:2], views[1][start + 1 : end : 2], strict=True))
            start = end

    def _view(self, buf: np.ndarray) -> list[np.ndarray]:
        return [
            buf[a:b].reshape(p.shape) for p, a, b in zip(self.params, self.offsets[:-1], self.offsets[1:], strict=True)
        ]

    def blas_threads(self) -> Any:
        """A context in which numpy's BLAS runs with `torch_threads` threads (more threads than cores slow these
        small matmuls down: benchmarks/results/throughput/design_measurements.md)."""
        return _blas().limit(limits=self.cfg.torch_threads, user_api="blas")

    # ------------------------------------------------------------------------------------ moving state in and out
    def _load(self, first: int = 0) -> None:
        """Read `params[first:]` and their Adam state from torch."""
        group = self.optimizer.param_groups[0]
        for i in range(first, len(self.params)):
            p = self.params[i]
            a, b = self.offsets[i], self.offsets[i + 1]
            self.flat[a:b] = p.detach().numpy().reshape(-1)
            state = self.optimizer.state[p]
            if len(state) == 0:  # lazy initialisation, as torch.optim.Adam does it
                fused_or_capturable = group["fused"] or group["capturable"]
                state["step"] = (
                    torch.zeros((), dtype=torch.float32)
                    if fused_or_capturable
                    else torch.tensor(0.0, dtype=torch.get_default_dtype())
                )
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            self.exp_avg[a:b] = state["exp_avg"].numpy().reshape(-1)
            self.exp_avg_sq[a:b] = state["exp_avg_sq"].numpy().reshape(-1)
            self.steps[i] = float(state["step"])

    def _store(self, first: int = 0) -> None:
        """Write `params[first:]` and their Adam state back to torch; `.grad` as the torch loop leaves it: the last
        minibatch's for the parameters stepped, None for the others."""
        with torch.no_grad():
            for i, p in enumerate(self.params):
                if i < first:
                    p.grad = None
                    continue
                a, b = self.offsets[i], self.offsets[i + 1]
                p.copy_(torch.from_numpy(self.flat[a:b]).view_as(p))
                state = self.optimizer.state[p]
                state["exp_avg"].copy_(torch.from_numpy(self.exp_avg[a:b]).view_as(p))
                state["exp_avg_sq"].copy_(torch.from_numpy(self.exp_avg_sq[a:b]).view_as(p))
                state["step"].fill_(self.steps[i])
                p.grad = torch.from_numpy(self.grad[a:b].copy()).view_as(p)

    # ------------------------------------------------------------------------------------ the pieces of a step
    def actor_pass(self, mb: Minibatch) -> GaussianPass:
        """The current policy at the minibatch's states and actions."""
        return gaussian_pass(self.actor, self.log_std[0], mb.obs, mb.actions)

    def actor_backward(self, acts: list[np.ndarray], g_mean: np.ndarray, g_log_std: np.ndarray) -> np.ndarray:
        """Write the actor's gradient into its part of `grad`, given d loss / d mean (B, A) (at the activations
        `acts` of `actor_pass`) and d loss / d log_std (A,); returns that part (a view: the next call overwrites it)."""
        self.log_std_grad[0] = g_log_std
        mlp_backward(self.actor, self.actor_grad, acts, g_mean)
        return self.grad[: self.actor_size]

    def set_actor_direction(self, direction: np.ndarray) -> None:
        """Set the actor's part of `grad` to -`direction` (an ascent direction of a method's own, e.g. TNB's bisector,
        flat and laid out as `ActorCritic.actor_parameters`) plus the entropy bonus's gradient on the log-std: Adam
        then steps the actor along `direction`."""
        np.negative(direction, out=self.grad[: self.actor_size])
        self.log_std_grad[0] -= np.float32(self.cfg.ent_coef)

    def critics_backward(self, mb: Minibatch) -> float:
        """Write the gradients of vf_coef x (each critic's value loss) into the critics' part of `grad`; returns the
        sum of the value losses."""
        cfg = self.cfg
        v_loss = 0.0
        for s, layers in self.critics.items():
            acts = mlp_forward(layers, mb.obs)
            loss, g_v = value_loss_and_grad(
                acts[-1][:, 0], mb.values[s], mb.returns[s], cfg.clip_coef, cfg.clip_vloss, cfg.vf_coef
            )
            v_loss += loss
            mlp_backward(layers, self.critics_grad[s], acts, g_v)
        return v_loss

    # -------------------------------------------------------------------------------------------------- steps
    def ppo_step(self, mb: Minibatch, advantage_stream: str = "task", term: MeanActionTerm | None = None) -> Stats:
        """PPO's loss on one minibatch (the clipped surrogate of `advantage_stream`'s advantages, the value losses,
        the entropy bonus, plus `term`, a loss on the actor's mean actions): its gradient into `grad`; returns the
        statistics that `ppo_update` averages."""
        cfg = self.cfg
        adv = mb.advantages[advantage_stream]
        if cfg.norm_adv:
            adv = normalized(adv)
        actor = self.actor_pass(mb)
        surrogate = clipped_surrogate(actor.logprob, mb.logprobs, adv, cfg.clip_coef)
        g_mean, g_log_std = logprob_backward(actor, surrogate.g_logprob)
        if term is not None:
            g_mean += term(mb.index, actor.mean)[1]
        entropy = gaussian_entropy(self.log_std[0])
        self.actor_backward(actor.acts, g_mean, g_log_std - np.float32(cfg.ent_coef))
        v_loss = self.critics_backward(mb)
        return {
            "policy_loss": surrogate.loss,
            "value_loss": v_loss,
            "entropy": entropy,
            "approx_kl": surrogate.approx_kl,
            "clipfrac": surrogate.clipfrac,
        }

    def critics_step(self, mb: Minibatch) -> Stats:
        """The critics' value losses alone (`Learner.fit_critics`): their gradient into the critics' part of `grad`."""
        return {"value_loss": self.critics_backward(mb)}

    # ------------------------------------------------------------------------------------------ the one loop
    def _clip_and_adam(self, first: int = 0) -> None:
        """Clip the global norm of the gradients of `params[first:]` and take Adam's step on them (the others are
        left alone, as torch's optimiser leaves the parameters without a gradient)."""
        start = int(self.offsets[first])
        g = self.grad[start:]
        steps = self.steps[first:]
        group = self.optimizer.param_groups[0]
        lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], float(group["eps"])
        if self._adam_constants is None or self._adam_constants[0] != (beta1, beta2, eps):
            f32 = np.float32
            as_f32 = (f32(beta1), f32(1 - beta1), f32(beta2), f32(1 - beta2), f32(eps))
            self._adam_constants = (beta1, beta2, eps), as_f32
        b1, one_minus_b1, b2, one_minus_b2, eps32 = self._adam_constants[1]
        norm = math.sqrt(float(np.dot(g, g)))
        coef = self.cfg.max_grad_norm / (norm + 1e-6)
        step_size, bc2_sqrt = self._step_size, self._bc2_sqrt  # float32, one value or one per element
        if advance_steps(steps):  # += 1; all parameters stepped as many times
            t = steps[0]
            step_size[0], bc2_sqrt[0] = lr / (1 - beta1**t), math.sqrt(1 - beta2**t)
        else:  # parameters stepped a different number of times (a method stepped only some of them)
            counts = np.diff(self.offsets)[first:]
            step_size = np.repeat(lr / (1 - beta1**steps), counts).astype(np.float32)
            bc2_sqrt = np.repeat(np.sqrt(1 - beta2**steps), counts).astype(np.float32)
        # Adam (torch.optim.Adam, no weight decay): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
        # p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), after g *= coef when coef < 1
        adam_step(
            g,
            self.flat[start:],
            self.exp_avg[start:],
            self.exp_avg_sq[start:],
            np.float32(coef),
            coef < 1.0,
            b1,
            one_minus_b1,
            b2,
            one_minus_b2,
            step_size,
            bc2_sqrt,
            eps32,
        )

    def run_epochs(
        self, batch: Batch, step: NumpyStep, advantages: Sequence[str] = ("task",), first: int = 0
    ) -> list[Stats]:
        """`update_epochs` passes of minibatch steps over `batch` (with the
        advantages of the streams `advantages`): per minibatch, the gradients of `step`, the global norm of those of
        `params[first:]` (0: all of them; `critic_start`: the critics') clipped to `max_grad_norm`, one Adam step on
        those; after an epoch whose last minibatch's `approx_kl` exceeds `target_kl`, stop. Returns every minibatch's
        statistics. The parameters and Adam state are read from torch before and written back after."""
        cfg = self.cfg
        with self.blas_threads():
            self._load(first)
            whole = Minibatch.of(batch, advantages, self.streams)
            stats: list[Stats] = []
            for _epoch in range(cfg.update_epochs):
                mbs = [mb.numpy() for mb in self.minibatches()]
                epoch = whole.select(np.concatenate(mbs))  # gather the epoch once, then take contiguous slices
                start = 0
                for mb in mbs:
                    stats.append(step(epoch.select(slice(start, start + len(mb)))))
                    start += len(mb)
                    self._clip_and_adam(first)
                kl = stats[-1].get("approx_kl") if stats else None
                if cfg.target_kl is not None and kl is not None and kl > cfg.target_kl:
                    break
            self._store(first)
        return stats

    def ppo_update(
        self, batch: Batch, advantage_stream: str = "task", term: MeanActionTerm | None = None
    ) -> dict[str, float]:
        """PPO's epochs of `ppo_step`; returns the mean `losses/*` statistics."""
        stats = self.run_epochs(batch, lambda mb: self.ppo_step(mb, advantage_stream, term), (advantage_stream,))
        return {f"losses/{k}": v for k, v in mean_stats(stats).items()}

    def fit_critics(self, batch: Batch) -> dict[str, float]:
        """PPO's epochs of Adam steps on the critics' value losses alone."""
        stats = self.run_epochs(batch, self.critics_step, (), self.critic_start)
        return {"losses/value_loss": mean_stats(stats)["value_loss"]}
