"""PPO's update in numpy (`NumpyPPOUpdate`): the computation of `Learner.ppo_update_torch` with the forward and
backward passes written out, for the `update_backend = "numpy"` setting (the default).

Why: the update of these small networks is bound by per-operation overhead, not arithmetic; torch spends several
times the CPU time of this version per minibatch (autograd graph, dispatched kernels, optimiser bookkeeping;
benchmarks/results/throughput/throughput.md, benchmarks/results/throughput/design_measurements.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import torch
from threadpoolctl import ThreadpoolController
from torch import nn

from npsco.ppo.agent import LOG_SQRT_2PI, ActorCritic
from npsco.ppo.config import PPOConfig
from npsco.ppo.rollout import Batch, MeanActionTerm

Layers = list[tuple[np.ndarray, np.ndarray]]
"""An MLP's (W, b) per layer: numpy views of its parameters, or of their gradients."""


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
    """`_mlp_linears`, for a module that `NumpyPPOUpdate.unsupported` accepted."""
    linears = _mlp_linears(module)
    if linears is None:
        raise ValueError("NumpyPPOUpdate needs tanh MLPs (see NumpyPPOUpdate.unsupported)")
    return linears


class NumpyPPOUpdate:
    """`Learner.ppo_update_torch` in numpy: the forward and backward passes of the actor and critic MLPs written out,
    the global gradient-norm clip and Adam on one flat float32 parameter vector.

    It computes what the torch loop computes, step for step: the same minibatches (drawn by the learner's
    `minibatches`, from its own generator), advantage normalisation with the unbiased std, the clipped surrogate and
    the (clipped) value losses with torch's gradient conventions at the kinks (`torch.max` splits a tie's gradient in
    halves; `clamp` passes the gradient at the bounds), the entropy bonus, `clip_grad_norm_` (max_norm / (norm +
    1e-6), only when below 1) and Adam as `torch.optim.Adam` (bias-corrected, eps added after the square root). The
    Adam moments and step counts are read from and written back to the torch optimiser, so a method mixing torch
    steps with `ppo_update` (TNB) keeps one consistent Adam. The differences are float32 rounding (summation order in
    the matmuls): tests/unit/test_fast_update.py checks the gradients and whole updates against the torch loop.

    It needs npsco's `ActorCritic` (tanh MLPs built by `policy.mlp`, float32) and a plain `torch.optim.Adam` with
    one parameter group (no weight decay, amsgrad, maximize); `unsupported` names the first condition that fails.
    """

    @staticmethod
    def unsupported(agent: nn.Module, optimizer: torch.optim.Optimizer, streams: tuple[str, ...]) -> str | None:
        """Why this update cannot run on `agent` and `optimizer` (training `streams`), or None when it can."""
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

    def __init__(self, cfg: PPOConfig, agent: ActorCritic, optimizer: torch.optim.Adam, streams: tuple[str, ...]):
        self.cfg, self.agent, self.optimizer, self.streams = cfg, agent, optimizer, streams
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
        self.tmp = np.empty(n, np.float32)
        self.steps = np.empty(len(self.params), np.float64)
        views = [self._view(buf) for buf in (self.flat, self.grad)]
        k = 2 * len(actor)
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

    # ------------------------------------------------------------------------------------ moving state in and out
    def _load(self) -> None:
        group = self.optimizer.param_groups[0]
        for i, p in enumerate(self.params):
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

    def _store(self) -> None:
        with torch.no_grad():
            for i, p in enumerate(self.params):
                a, b = self.offsets[i], self.offsets[i + 1]
                p.copy_(torch.from_numpy(self.flat[a:b]).view_as(p))
                state = self.optimizer.state[p]
                state["exp_avg"].copy_(torch.from_numpy(self.exp_avg[a:b]).view_as(p))
                state["exp_avg_sq"].copy_(torch.from_numpy(self.exp_avg_sq[a:b]).view_as(p))
                state["step"].fill_(self.steps[i])
                p.grad = torch.from_numpy(self.grad[a:b].copy()).view_as(p)  # the last minibatch's, as torch leaves it

    # ------------------------------------------------------------------------------------------- the computation
    @staticmethod
    def _forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> list[np.ndarray]:
        """Activations [x, h1, ..., out] of a tanh MLP."""
        acts = [x]
        last = len(layers) - 1
        for i, (w, b) in enumerate(layers):
            x = np.matmul(x, w.T)
            x += b
            if i < last:
                np.tanh(x, out=x)
            acts.append(x)
        return acts

    @staticmethod
    def _backward(layers: Layers, grads: Layers, acts: list[np.ndarray], g: np.ndarray) -> None:
        """Write d loss / d (W, b) of every layer into `grads`, given g = d loss / d output."""
        for i in range(len(layers) - 1, -1, -1):
            gw, gb = grads[i]
            np.matmul(g.T, acts[i], out=gw)
            np.add.reduce(g, axis=0, out=gb)
            if i:
                g = np.matmul(g, layers[i][0])
                h = acts[i]
                g *= 1.0 - h * h

    def loss_and_grad(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        old_logprob: np.ndarray,
        adv: np.ndarray,
        values: dict[str, np.ndarray],
        returns: dict[str, np.ndarray],
        term: MeanActionTerm | None = None,
        index: np.ndarray | None = None,
    ) -> np.ndarray:
        """The PPO loss of one minibatch (plus `term`, a loss on the actor's mean actions, at the batch indices
        `index`): writes its gradient into `self.grad`; returns the five statistics (policy loss, value loss,
        entropy, approx KL, clip fraction). `values`/`returns` map stream -> array."""
        cfg = self.cfg
        B = obs.shape[0]
        clip = cfg.clip_coef
        inv_b = np.float32(1.0 / B)
        add = np.add.reduce  # (ndarray.mean/std go through slow Python wrappers; these arrays are tiny)
        if cfg.norm_adv:  # torch's std is the unbiased one
            centred = adv - add(adv) * inv_b
            adv = centred / (np.sqrt(add(centred * centred) / np.float32(B - 1)) + np.float32(1e-8))
        # actor: log pi(a|s) and the clipped surrogate
        acts = self._forward(self.actor, obs)
        mean = acts[-1]
        log_std = self.log_std[0]
        inv_std = np.exp(-log_std)
        z = (actions - mean) * inv_std
        logprob = -0.5 * np.einsum("ba,ba->b", z, z) - (log_std.sum() + np.float32(LOG_SQRT_2PI * log_std.size))
        log_ratio = logprob - old_logprob
        ratio = np.exp(log_ratio)
        clipped = np.clip(ratio, 1 - clip, 1 + clip)
        unclipped_term, clipped_term = -adv * ratio, -adv * clipped
        pg_loss = add(np.maximum(unclipped_term, clipped_term)) * inv_b
        # d pg / d ratio: torch.max gives a tie half to each side, clamp passes the gradient inside [lo, hi]
        w_unclipped = np.where(unclipped_term > clipped_term, 1.0, np.where(unclipped_term == clipped_term, 0.5, 0.0))
        in_range = (ratio >= 1 - clip) & (ratio <= 1 + clip)
        g_ratio = (adv * -inv_b) * (w_unclipped + (1.0 - w_unclipped) * in_range)
        g_logprob = (g_ratio * ratio).astype(np.float32)
        g_mean = (g_logprob[:, None] * z) * inv_std
        if term is not None:
            assert index is not None, "a mean-action term needs the minibatch's indices"
            g_mean += term(index, mean)[1]
        entropy = (0.5 + LOG_SQRT_2PI + log_std).sum()
        self.log_std_grad[0] = add(g_logprob[:, None] * (z * z - 1.0), axis=0) - np.float32(cfg.ent_coef)
        self._backward(self.actor, self.actor_grad, acts, g_mean)
        # critics
        v_loss = 0.0
        for s, layers in self.critics.items():
            cacts = self._forward(layers, obs)
            v = cacts[-1][:, 0]
            err = v - returns[s]
            unclipped = err * err
            if cfg.clip_vloss:
                old = values[s]
                vc = old + np.clip(v - old, -clip, clip)
                cerr = vc - returns[s]
                clipped_sq = cerr * cerr
                v_loss += 0.5 * float(add(np.maximum(unclipped, clipped_sq))) / B
                w = np.where(unclipped > clipped_sq, 1.0, np.where(unclipped == clipped_sq, 0.5, 0.0))
                d = v - old
                g_v = w * err + (1.0 - w) * cerr * ((d >= -clip) & (d <= clip))
            else:
                v_loss += 0.5 * float(add(unclipped)) / B
                g_v = err
            g_v = (g_v * (cfg.vf_coef / B)).astype(np.float32)[:, None]
            self._backward(layers, self.critics_grad[s], cacts, g_v)
        approx_kl = add((ratio - 1) - log_ratio) * inv_b
        clipfrac = np.count_nonzero(np.abs(ratio - 1.0) > clip) / B
        return np.array([pg_loss, v_loss, entropy, approx_kl, clipfrac])

    def _clip_and_adam(self) -> None:
        cfg, g, tmp = self.cfg, self.grad, self.tmp
        group = self.optimizer.param_groups[0]
        lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], float(group["eps"])
        norm = math.sqrt(float(np.dot(g, g)))
        coef = cfg.max_grad_norm / (norm + 1e-6)
        if coef < 1.0:
            g *= np.float32(coef)
        # Adam (torch.optim.Adam, no weight decay): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
        # p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
        m, v = self.exp_avg, self.exp_avg_sq
        m *= np.float32(beta1)
        np.multiply(g, np.float32(1 - beta1), out=tmp)
        m += tmp
        v *= np.float32(beta2)
        np.multiply(g, g, out=tmp)
        tmp *= np.float32(1 - beta2)
        v += tmp
        self.steps += 1
        step_size: np.float32 | np.ndarray  # float32, one value per parameter or one per element
        bc2_sqrt: float | np.ndarray
        if np.all(self.steps == self.steps[0]):
            t = self.steps[0]
            step_size, bc2_sqrt = np.float32(lr / (1 - beta1**t)), math.sqrt(1 - beta2**t)
        else:  # parameters stepped a different number of times (a method stepped only some of them)
            counts = np.diff(self.offsets)
            step_size = np.repeat(lr / (1 - beta1**self.steps), counts).astype(np.float32)
            bc2_sqrt = np.repeat(np.sqrt(1 - beta2**self.steps), counts).astype(np.float32)
        np.sqrt(v, out=tmp)
        tmp /= bc2_sqrt
        tmp += np.float32(eps)
        np.divide(m, tmp, out=tmp)
        tmp *= step_size
        self.flat -= tmp

    def run(
        self,
        batch: Batch,
        minibatches: Callable[[], Sequence[torch.Tensor]],
        advantage_stream: str = "task",
        term: MeanActionTerm | None = None,
    ) -> dict[str, float]:
        """`update_epochs` passes over `batch`, in the minibatches that `minibatches()` draws for each epoch; returns
        the mean `losses/*` statistics. numpy's BLAS runs with `torch_threads` threads meanwhile (more threads than
        cores slow these small matmuls down: benchmarks/results/throughput/design_measurements.md)."""
        with _blas().limit(limits=self.cfg.torch_threads, user_api="blas"):
            return self._run(batch, minibatches, advantage_stream, term)

    def _run(
        self,
        batch: Batch,
        minibatches: Callable[[], Sequence[torch.Tensor]],
        advantage_stream: str,
        term: MeanActionTerm | None,
    ) -> dict[str, float]:
        cfg, streams = self.cfg, self.streams
        self._load()
        obs, actions = batch.obs.detach().numpy(), batch.actions.detach().numpy()
        logprobs = batch.logprobs.detach().numpy()
        adv = batch.advantages[advantage_stream].detach().numpy()
        values = {s: batch.values[s].detach().numpy() for s in streams}
        returns = {s: batch.returns[s].detach().numpy() for s in streams}
        stats = []
        for _epoch in range(cfg.update_epochs):
            mbs = [mb.numpy() for mb in minibatches()]
            idx = np.concatenate(mbs)  # gather the epoch once, then take contiguous slices
            e_obs, e_act, e_lp, e_adv = obs[idx], actions[idx], logprobs[idx], adv[idx]
            e_val = {s: values[s][idx] for s in streams}
            e_ret = {s: returns[s][idx] for s in streams}
            start = 0
            for mb in mbs:
                sl = slice(start, start + len(mb))
                start += len(mb)
                stats.append(
                    self.loss_and_grad(
                        e_obs[sl],
                        e_act[sl],
                        e_lp[sl],
                        e_adv[sl],
                        {s: e_val[s][sl] for s in streams},
                        {s: e_ret[s][sl] for s in streams},
                        term,
                        mb,
                    )
                )
                self._clip_and_adam()
            if cfg.target_kl is not None and stats[-1][3] > cfg.target_kl:
                break
        self._store()
        means = np.mean(stats, axis=0)
        names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
        return {f"losses/{k}": float(v) for k, v in zip(names, means, strict=True)}
