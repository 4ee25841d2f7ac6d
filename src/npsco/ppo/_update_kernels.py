"""The numpy learner's elementwise work, compiled (numba): PPO's clipped surrogate and value loss with their gradients,
the advantages' normalisation, the Gaussian policy's log-probability pieces, the tanh layers' backward step and Adam's
step, each one call instead of ten to thirty numpy operations on arrays of a minibatch's size.

Each kernel computes what the numpy code of `npsco.ppo.numpy_nets` and `npsco.ppo.fast_update` computed, operation
for operation in the same dtypes (float32 where numpy computed in float32, float64 where it promoted; a Python float
meets a float32 array as a float32, as in numpy 2), with numpy's sums in numpy's order (`npsco.ppo._numpy_sums`), so
the updates keep their bits (tests/unit/test_update_kernels.py checks each against the numpy original). The matrix
products, exp and tanh stay with numpy (BLAS and numpy's own exp and tanh round differently from a compiled loop).
Comparisons are written so that a NaN goes where numpy's `maximum`, `minimum` and `where` send it.
"""

from __future__ import annotations

import math

import numpy as np

from npsco.ppo._numpy_sums import column_sums, jit, reduce_sum


@jit
def _maximum(a: np.float32, b: np.float32) -> np.float32:
    """np.maximum(a, b): the larger, NaN when either is NaN."""
    if a != a or a > b:
        return a
    return b


@jit
def normalized(adv: np.ndarray) -> np.ndarray:
    """(adv - mean) / (unbiased std + 1e-8) of a float32 vector of n >= 2 values (`numpy_nets.normalized`)."""
    n = adv.size
    mean = np.float32(reduce_sum(adv)) * np.float32(1.0 / n)
    centred = np.empty(n, np.float32)
    squares = np.empty(n, np.float32)
    for i in range(n):
        c = adv[i] - mean
        centred[i] = c
        squares[i] = c * c
    denom = np.float32(math.sqrt(np.float32(reduce_sum(squares)) / np.float32(n - 1))) + np.float32(1e-8)
    for i in range(n):
        centred[i] = centred[i] / denom
    return centred


@jit
def standardized_actions(actions: np.ndarray, mean: np.ndarray, inv_std: np.ndarray) -> np.ndarray:
    """z = (actions - mean) * inv_std, float32 (B, A) from actions and means (B, A) and 1 / std (A,)."""
    rows, cols = actions.shape
    z = np.empty((rows, cols), np.float32)
    for i in range(rows):
        for j in range(cols):
            z[i, j] = (actions[i, j] - mean[i, j]) * inv_std[j]
    return z


@jit
def gaussian_logprob(zz: np.ndarray, log_std: np.ndarray, log_norm: np.float32) -> np.ndarray:
    """log pi = -0.5 sum_a z^2 - (sum log_std + log_norm), float32, given zz (B,) = sum_a z^2 and log_norm = A log
    sqrt(2 pi) as float32."""
    offset = np.float32(reduce_sum(log_std)) + log_norm
    out = np.empty(zz.size, np.float32)
    for i in range(zz.size):
        out[i] = zz[i] * np.float32(-0.5) - offset
    return out


@jit
def gaussian_entropy(log_std: np.ndarray, constant: np.float32) -> np.float32:
    """sum_a (constant + log_std), float32, with constant = 0.5 + log sqrt(2 pi) as float32."""
    terms = np.empty(log_std.size, np.float32)
    for j in range(log_std.size):
        terms[j] = constant + log_std[j]
    return np.float32(reduce_sum(terms))


@jit
def logprob_grads(g_logprob: np.ndarray, z: np.ndarray, inv_std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(d loss / d mean (B, A), d loss / d log_std (A,)), float32, given g_logprob = d loss / d log pi (B,)."""
    rows, cols = z.shape
    g_mean = np.empty((rows, cols), np.float32)
    terms = np.empty((rows, cols), np.float32)
    for i in range(rows):
        g = g_logprob[i]
        for j in range(cols):
            zij = z[i, j]
            g_mean[i, j] = (g * zij) * inv_std[j]
            terms[i, j] = g * (zij * zij - np.float32(1.0))
    g_log_std = np.empty(cols, np.float32)
    column_sums(terms, g_log_std)
    return g_mean, g_log_std


@jit
def surrogate(
    ratio: np.ndarray, log_ratio: np.ndarray, adv: np.ndarray, clip: float, g_logprob: np.ndarray
) -> tuple[np.float32, np.float32, int]:
    """PPO's clipped surrogate of a minibatch of n values, given r = exp(log_ratio) (float32): writes d loss / d log
    pi into `g_logprob` (n,) float32 and returns (loss, approx_kl, how many |r - 1| > clip), as
    `numpy_nets.clipped_surrogate`: the weight of the unclipped term 1, 0.5 at a tie, 0, and the gradient in float64."""
    n = ratio.size
    inv_b = np.float32(1.0 / n)
    lo, hi, clip32 = np.float32(1 - clip), np.float32(1 + clip), np.float32(clip)
    larger = np.empty(n, np.float32)
    kl_terms = np.empty(n, np.float32)
    clipped_count = 0
    for i in range(n):
        r, a = ratio[i], adv[i]
        rc = r
        if rc < lo:
            rc = lo
        if rc > hi:
            rc = hi
        unclipped, clipped = -a * r, -a * rc
        larger[i] = _maximum(unclipped, clipped)
        w = 1.0 if unclipped > clipped else (0.5 if unclipped == clipped else 0.0)
        in_range = 1.0 if (r >= lo and r <= hi) else 0.0
        g_ratio = np.float64(a * -inv_b) * (w + (1.0 - w) * in_range)
        g_logprob[i] = np.float32(g_ratio * np.float64(r))
        kl_terms[i] = (r - np.float32(1.0)) - log_ratio[i]
        if abs(r - np.float32(1.0)) > clip32:
            clipped_count += 1
    loss = np.float32(reduce_sum(larger)) * inv_b
    approx_kl = np.float32(reduce_sum(kl_terms)) * inv_b
    return loss, approx_kl, clipped_count


@jit
def value_loss(
    v: np.ndarray, old: np.ndarray, returns: np.ndarray, clip: float, clip_vloss: bool, coef: float
) -> tuple[float, np.ndarray]:
    """PPO's value loss of the critic's outputs `v` (B,) float32 and d (coef x loss) / d v as a (B, 1) float32 column
    (`numpy_nets.value_loss_and_grad`): the clipped loss with its gradient in float64; the plain one in float32."""
    n = v.size
    g = np.empty((n, 1), np.float32)
    larger = np.empty(n, np.float32)
    lo, hi = np.float32(-clip), np.float32(clip)
    scale = coef / n
    if not clip_vloss:
        scale32 = np.float32(scale)
        for i in range(n):
            err = v[i] - returns[i]
            larger[i] = err * err
            g[i, 0] = err * scale32
        return 0.5 * np.float64(np.float32(reduce_sum(larger))) / n, g
    for i in range(n):
        err = v[i] - returns[i]
        unclipped = err * err
        d = v[i] - old[i]
        dc = d
        if dc < lo:
            dc = lo
        if dc > hi:
            dc = hi
        cerr = (old[i] + dc) - returns[i]
        clipped = cerr * cerr
        larger[i] = _maximum(unclipped, clipped)
        w = 1.0 if unclipped > clipped else (0.5 if unclipped == clipped else 0.0)
        in_range = 1.0 if (d >= lo and d <= hi) else 0.0
        g_v = w * np.float64(err) + (1.0 - w) * np.float64(cerr) * in_range
        g[i, 0] = np.float32(g_v * scale)
    return 0.5 * np.float64(np.float32(reduce_sum(larger))) / n, g


@jit
def tanh_backward(g: np.ndarray, h: np.ndarray, g_bias: np.ndarray) -> None:
    """Through a tanh layer: g *= 1 - h^2 (in place, float32 (B, K), C-contiguous), then `g_bias` = g's column sums
    (that layer's bias gradient, as `np.add.reduce(g, axis=0)`)."""
    rows, cols = g.shape
    for i in range(rows):
        for j in range(cols):
            hij = h[i, j]
            g[i, j] = g[i, j] * (np.float32(1.0) - hij * hij)
    column_sums(g, g_bias)


@jit
def adam_step(
    grad: np.ndarray,
    params: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    grad_scale: np.float32,
    scale_grad: bool,
    beta1: np.float32,
    one_minus_beta1: np.float32,
    beta2: np.float32,
    one_minus_beta2: np.float32,
    step_size: np.ndarray,
    bc2_sqrt: np.ndarray,
    eps: np.float32,
) -> None:
    """One Adam step (torch.optim.Adam, no weight decay) on float32 vectors, in place: grad *= grad_scale when
    `scale_grad` (the norm clip); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= step_size * m / (sqrt(v) /
    bc2_sqrt + eps). `step_size` and `bc2_sqrt` are float32, of one value or one per element."""
    one = step_size.size == 1
    s0, c0 = step_size[0], bc2_sqrt[0]
    for i in range(grad.size):
        g = grad[i]
        if scale_grad:
            g = g * grad_scale
            grad[i] = g
        m = exp_avg[i] * beta1 + g * one_minus_beta1
        v = exp_avg_sq[i] * beta2 + (g * g) * one_minus_beta2
        exp_avg[i], exp_avg_sq[i] = m, v
        s, c = (s0, c0) if one else (step_size[i], bc2_sqrt[i])
        params[i] = params[i] - (m / (np.float32(math.sqrt(v)) / c + eps)) * s


@jit
def advance_steps(steps: np.ndarray) -> bool:
    """Adam's step counts (float64) += 1; returns whether they are all equal."""
    uniform = True
    for i in range(steps.size):
        steps[i] += 1.0
        uniform &= steps[i] == steps[0]
    return uniform
