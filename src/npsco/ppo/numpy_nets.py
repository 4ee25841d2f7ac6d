"""The networks' maths in numpy, for the fast updates (`npsco.ppo.fast_update` and the methods' own steps): the tanh
MLP's forward pass, its backward (vector-Jacobian) and forward-mode (Jacobian-vector) passes, the diagonal Gaussian
policy's log-probability and its gradient, and PPO's clipped surrogate and value loss with their gradients.

Every gradient follows torch's conventions where the maths has a kink (`torch.max` splits a tie's gradient in halves;
`clamp` passes the gradient at its bounds), so that the fast updates equal the torch ones up to float32 rounding
(tests/unit/test_fast_update.py, tests/unit/test_fast_methods.py check them against autograd).

The elementwise work runs in compiled kernels (`npsco.ppo._update_kernels`: the same operations in the same dtypes as
numpy's, so the same bits); the matrix products, exp and tanh stay with numpy. Inputs are float32.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from npsco.ppo._update_kernels import gaussian_entropy as entropy_sum
from npsco.ppo._update_kernels import gaussian_logprob, logprob_grads, standardized_actions, surrogate, tanh_backward
from npsco.ppo._update_kernels import normalized as normalized_kernel
from npsco.ppo._update_kernels import value_loss as value_loss_kernel
from npsco.ppo.agent import LOG_SQRT_2PI

Layers = list[tuple[np.ndarray, np.ndarray]]
"""An MLP's (W, b) per layer: numpy views of its parameters, of their gradients, or of a direction in their space."""

_add = np.add.reduce  # (ndarray.mean/sum go through slow Python wrappers; these arrays are tiny)


# ----------------------------------------------------------------------------------------------- flat vectors
def flat_views(buf: np.ndarray, shapes: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Views of consecutive pieces of the 1-D `buf`, one per shape (the tensors of a flat parameter vector)."""
    out, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(buf[start : start + size].reshape(shape))
        start += size
    return out


def actor_views(buf: np.ndarray, shapes: Sequence[Sequence[int]]) -> tuple[Layers, np.ndarray]:
    """The actor's (W, b) per layer and its (1, A) log-std, as views of a flat vector laid out as
    `ActorCritic.actor_parameters` (`shapes`: those parameters' shapes)."""
    views = flat_views(buf, shapes)
    return list(zip(views[0:-1:2], views[1:-1:2], strict=True)), views[-1]


# ------------------------------------------------------------------------------------------------- tanh MLPs
def mlp_forward(layers: Layers, x: np.ndarray) -> list[np.ndarray]:
    """Activations [x, h1, ..., out] of a tanh MLP (the last layer linear)."""
    acts = [x]
    last = len(layers) - 1
    for i, (w, b) in enumerate(layers):
        x = np.matmul(x, w.T)
        x += b
        if i < last:
            np.tanh(x, out=x)
        acts.append(x)
    return acts


def mlp_backward(layers: Layers, grads: Layers, acts: list[np.ndarray], g: np.ndarray) -> None:
    """Write d loss / d (W, b) of every layer into `grads`, given g = d loss / d output (float32) and the forward
    activations."""
    last = len(layers) - 1
    np.add.reduce(g, axis=0, out=grads[last][1])
    for i in range(last, -1, -1):
        np.matmul(g.T, acts[i], out=grads[i][0])
        if i:  # through the tanh: g = (g W) (1 - h^2), and the bias gradient of the layer below, in one call
            g = np.matmul(g, layers[i][0])
            tanh_backward(g, acts[i], grads[i - 1][1])


def mlp_jvp(layers: Layers, tangents: Layers, acts: list[np.ndarray]) -> np.ndarray:
    """d output along the parameter direction `tangents` (forward mode), at the forward activations `acts`: per layer
    d a = d h_prev W^T + h_prev dW^T + db, and d h = (1 - h^2) d a through the tanh."""
    d: np.ndarray | None = None
    last = len(layers) - 1
    for i, ((w, _), (dw, db)) in enumerate(zip(layers, tangents, strict=True)):
        out = np.matmul(acts[i], dw.T)
        out += db
        if d is not None:
            out += np.matmul(d, w.T)
        if i < last:
            h = acts[i + 1]
            out *= 1.0 - h * h
        d = out
    assert d is not None, "an MLP has at least one layer"
    return d


# ------------------------------------------------------------------------------------------ Gaussian policy
@dataclass
class GaussianPass:
    """The policy (tanh-MLP mean, state-independent log-std) at a batch of states and actions: the log-probabilities
    and what their gradient needs."""

    acts: list[np.ndarray]
    """The mean MLP's activations; the last one is the mean, (B, A)."""
    z: np.ndarray
    """(a - mean) / std, (B, A)."""
    inv_std: np.ndarray
    """1 / std, (A,)."""
    logprob: np.ndarray
    """log pi(a|s) summed over action dims, (B,)."""

    @property
    def mean(self) -> np.ndarray:
        return self.acts[-1]


def gaussian_pass(layers: Layers, log_std: np.ndarray, obs: np.ndarray, actions: np.ndarray) -> GaussianPass:
    """The policy of `layers` and `log_std` (A,) at `obs` (B, obs_dim), and log pi(actions | obs)."""
    acts = mlp_forward(layers, obs)
    inv_std = np.exp(-log_std)
    z = standardized_actions(actions, acts[-1], inv_std)
    logprob = gaussian_logprob(np.einsum("ba,ba->b", z, z), log_std, np.float32(LOG_SQRT_2PI * log_std.size))
    return GaussianPass(acts, z, inv_std, logprob)


def logprob_backward(policy: GaussianPass, g_logprob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d loss / d mean (B, A) and d loss / d log_std (A,), given g_logprob = d loss / d logprob (B,) float32."""
    return logprob_grads(g_logprob, policy.z, policy.inv_std)


def gaussian_entropy(log_std: np.ndarray) -> np.floating:
    """The policy's entropy (the same at every state), summed over action dims; its gradient on log_std is 1."""
    return np.float32(entropy_sum(log_std, np.float32(0.5 + LOG_SQRT_2PI)))


def gaussian_kl(mean_p: np.ndarray, log_std_p: np.ndarray, mean_q: np.ndarray, log_std_q: np.ndarray) -> np.ndarray:
    """KL(p || q) per state for diagonal Gaussians, summed over action dims (tests/oracles/cpo.py has it in torch)."""
    var_p, var_q = np.exp(2 * log_std_p), np.exp(2 * log_std_q)
    diff = mean_p - mean_q
    return _add(log_std_q - log_std_p + (var_p + diff * diff) / (2 * var_q) - 0.5, axis=-1)


# ------------------------------------------------------------------------------------------------ PPO's losses
def normalized(adv: np.ndarray) -> np.ndarray:
    """Zero mean, unit std with torch's unbiased std (the minibatch normalisation of PPO's implementation details), of
    float32 `adv` (a compiled kernel)."""
    return normalized_kernel(adv)


@dataclass
class Surrogate:
    """PPO's clipped surrogate on one minibatch, its gradient and statistics."""

    loss: np.floating
    """mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))), r = pi / pi_old."""
    g_logprob: np.ndarray
    """d loss / d log pi(a|s), (B,) float32."""
    approx_kl: np.floating
    """mean((r - 1) - log r)."""
    clipfrac: float
    """Fraction of the minibatch with |r - 1| > eps."""


def clipped_surrogate(logprob: np.ndarray, old_logprob: np.ndarray, adv: np.ndarray, clip: float) -> Surrogate:
    """The clipped surrogate of the advantages `adv` (as given: normalise them first if so configured); float32
    inputs. The gradient follows torch: torch.max gives a tie half to each side, clamp passes it inside [lo, hi]."""
    n = logprob.shape[0]
    log_ratio = logprob - old_logprob
    g_logprob = np.empty(n, np.float32)
    loss, approx_kl, clipped = surrogate(np.exp(log_ratio), log_ratio, adv, clip, g_logprob)
    return Surrogate(np.float32(loss), g_logprob, np.float32(approx_kl), clipped / n)


def value_loss_and_grad(
    v: np.ndarray, old: np.ndarray, returns: np.ndarray, clip: float, clip_vloss: bool, coef: float
) -> tuple[float, np.ndarray]:
    """PPO's value loss of the critic's outputs `v` (B,), 0.5 x the mean squared error to the returns (with
    `clip_vloss`, the larger of it and the error of `v` clipped to `old` +- `clip`), and d (coef x loss) / d v as a
    (B, 1) float32 column (the critic's output gradient); float32 inputs (a compiled kernel)."""
    loss, g_v = value_loss_kernel(v, old, returns, clip, clip_vloss, coef)
    return float(loss), g_v
