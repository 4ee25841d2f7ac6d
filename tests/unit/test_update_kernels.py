"""The numpy learner's compiled pieces (`npsco.ppo._update_kernels`, behind `npsco.ppo.numpy_nets` and
`NumpyLearner`'s Adam step) give the bits of the numpy code they replaced, written out here as the reference: on
random float32 data, with ties, clip bounds hit exactly, values outside the clip range and NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from npsco.ppo import numpy_nets
from npsco.ppo._update_kernels import adam_step, advance_steps
from npsco.ppo.agent import LOG_SQRT_2PI

_add = np.add.reduce


# ------------------------------------------------------------------------------- the numpy originals, as they were
def ref_normalized(adv):
    n = adv.shape[0]
    centred = adv - _add(adv) * np.float32(1.0 / n)
    return centred / (np.sqrt(_add(centred * centred) / np.float32(n - 1)) + np.float32(1e-8))


def ref_gaussian(acts_mean, log_std, actions):
    inv_std = np.exp(-log_std)
    z = (actions - acts_mean) * inv_std
    logprob = -0.5 * np.einsum("ba,ba->b", z, z) - (log_std.sum() + np.float32(LOG_SQRT_2PI * log_std.size))
    return z, inv_std, logprob


def ref_logprob_backward(z, inv_std, g_logprob):
    return (g_logprob[:, None] * z) * inv_std, _add(g_logprob[:, None] * (z * z - 1.0), axis=0)


def ref_clip(x, low, high):
    return np.minimum(np.maximum(x, low), high)


def ref_surrogate(logprob, old_logprob, adv, clip):
    n = logprob.shape[0]
    inv_b = np.float32(1.0 / n)
    log_ratio = logprob - old_logprob
    ratio = np.exp(log_ratio)
    unclipped_term, clipped_term = -adv * ratio, -adv * ref_clip(ratio, 1 - clip, 1 + clip)
    loss = _add(np.maximum(unclipped_term, clipped_term)) * inv_b
    w_unclipped = np.where(unclipped_term > clipped_term, 1.0, np.where(unclipped_term == clipped_term, 0.5, 0.0))
    in_range = (ratio >= 1 - clip) & (ratio <= 1 + clip)
    g_ratio = (adv * -inv_b) * (w_unclipped + (1.0 - w_unclipped) * in_range)
    approx_kl = _add((ratio - 1) - log_ratio) * inv_b
    clipfrac = np.count_nonzero(np.abs(ratio - 1.0) > clip) / n
    return loss, (g_ratio * ratio).astype(np.float32), approx_kl, clipfrac


def ref_value_loss(v, old, returns, clip, clip_vloss, coef):
    n = v.shape[0]
    err = v - returns
    unclipped = err * err
    if clip_vloss:
        cerr = old + ref_clip(v - old, -clip, clip) - returns
        clipped_sq = cerr * cerr
        loss = 0.5 * float(_add(np.maximum(unclipped, clipped_sq))) / n
        w = np.where(unclipped > clipped_sq, 1.0, np.where(unclipped == clipped_sq, 0.5, 0.0))
        d = v - old
        g_v = w * err + (1.0 - w) * cerr * ((d >= -clip) & (d <= clip))
    else:
        loss = 0.5 * float(_add(unclipped)) / n
        g_v = err
    return loss, (g_v * (coef / n)).astype(np.float32)[:, None]


def ref_mlp_backward(layers, grads, acts, g):
    for i in range(len(layers) - 1, -1, -1):
        gw, gb = grads[i]
        np.matmul(g.T, acts[i], out=gw)
        np.add.reduce(g, axis=0, out=gb)
        if i:
            g = np.matmul(g, layers[i][0])
            h = acts[i]
            g *= 1.0 - h * h


def ref_adam(g, flat, m, v, max_norm, steps, counts, lr, beta1, beta2, eps):
    tmp = np.empty_like(g)
    norm = math.sqrt(float(np.dot(g, g)))
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0:
        g *= np.float32(coef)
    m *= np.float32(beta1)
    np.multiply(g, np.float32(1 - beta1), out=tmp)
    m += tmp
    v *= np.float32(beta2)
    np.multiply(g, g, out=tmp)
    tmp *= np.float32(1 - beta2)
    v += tmp
    steps += 1
    if np.all(steps == steps[0]):
        t = steps[0]
        step_size, bc2_sqrt = np.float32(lr / (1 - beta1**t)), math.sqrt(1 - beta2**t)
    else:
        step_size = np.repeat(lr / (1 - beta1**steps), counts).astype(np.float32)
        bc2_sqrt = np.repeat(np.sqrt(1 - beta2**steps), counts).astype(np.float32)
    np.sqrt(v, out=tmp)
    tmp /= bc2_sqrt
    tmp += np.float32(eps)
    np.divide(m, tmp, out=tmp)
    tmp *= step_size
    flat -= tmp


# ------------------------------------------------------------------------------------------------------- the tests
def same(a, b) -> bool:
    """Bit for bit, NaNs included (the same dtype and shape)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def f32(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("n", [2, 7, 64, 129, 1000])
def test_normalized(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        adv = f32(rng, n, scale=10.0 ** rng.uniform(-3, 3))
        assert same(numpy_nets.normalized(adv), ref_normalized(adv))


@pytest.mark.parametrize("shape", [(64, 3), (64, 6), (33, 1), (200, 17)])
def test_gaussian_pass_and_its_backward(shape):
    rng = np.random.default_rng(shape[1])
    b, a = shape
    layers = [(f32(rng, 8, 5), f32(rng, 8)), (f32(rng, a, 8), f32(rng, a))]
    obs, actions, log_std = f32(rng, b, 5), f32(rng, b, a), f32(rng, a, scale=0.5)
    got = numpy_nets.gaussian_pass(layers, log_std, obs, actions)
    z, inv_std, logprob = ref_gaussian(got.mean, log_std, actions)
    assert same(got.z, z) and same(got.inv_std, inv_std) and same(got.logprob, logprob)
    g_logprob = f32(rng, b)
    for got_part, ref_part in zip(
        numpy_nets.logprob_backward(got, g_logprob), ref_logprob_backward(z, inv_std, g_logprob), strict=True
    ):
        assert same(got_part, ref_part)
    expected_entropy = (0.5 + LOG_SQRT_2PI + log_std).sum()
    assert same(numpy_nets.gaussian_entropy(log_std), expected_entropy)


@pytest.mark.parametrize("clip", [0.2, 0.1, 0.3])
def test_clipped_surrogate(clip):
    rng = np.random.default_rng(int(clip * 10))
    n = 256
    for trial in range(20):
        old = f32(rng, n, scale=2.0)
        log_ratio = f32(rng, n, scale=0.3)
        adv = f32(rng, n, scale=3.0)
        adv[:8] = 0.0  # ties between the two terms
        if trial % 2:  # ratios exactly on the clip bounds and just beside them
            lo, hi = np.float32(1 - clip), np.float32(1 + clip)
            bounds = np.array([lo, hi, np.nextafter(lo, 0), np.nextafter(hi, 2)], np.float32)
            log_ratio[8:12] = np.log(bounds)
        logprob = (old + log_ratio).astype(np.float32)
        got = numpy_nets.clipped_surrogate(logprob, old, adv, clip)
        loss, g, kl, clipfrac = ref_surrogate(logprob, old, adv, clip)
        assert same(got.loss, loss) and same(got.g_logprob, g) and same(got.approx_kl, kl)
        assert got.clipfrac == clipfrac
        assert 0.05 < clipfrac < 0.95  # both sides of the clip


def test_clipped_surrogate_keeps_nan_where_numpy_does():
    logprob = np.array([0.0, np.nan, 0.1, -0.05], np.float32)
    old = np.zeros(4, np.float32)
    adv = np.array([1.0, 1.0, np.nan, -1.0], np.float32)
    got = numpy_nets.clipped_surrogate(logprob, old, adv, 0.2)
    loss, g, kl, clipfrac = ref_surrogate(logprob, old, adv, 0.2)
    assert same(got.loss, loss) and same(got.g_logprob, g) and same(got.approx_kl, kl) and got.clipfrac == clipfrac


@pytest.mark.parametrize("clip_vloss", [True, False])
def test_value_loss(clip_vloss):
    rng = np.random.default_rng(3)
    for _ in range(20):
        v, old, returns = f32(rng, 64, 1)[:, 0], f32(rng, 64), f32(rng, 64)
        old[:4] = v[:4]  # v - old = 0
        old[4:6] = v[4:6] - np.float32(0.2)  # around the clip bound
        got = numpy_nets.value_loss_and_grad(v, old, returns, 0.2, clip_vloss, 0.5)
        expected = ref_value_loss(v, old, returns, 0.2, clip_vloss, 0.5)
        assert got[0] == expected[0] and same(got[1], expected[1])


def test_mlp_backward():
    rng = np.random.default_rng(4)
    sizes = [11, 64, 64, 3]
    layers = [(f32(rng, o, i, scale=0.3), f32(rng, o)) for i, o in zip(sizes[:-1], sizes[1:], strict=True)]
    acts = numpy_nets.mlp_forward(layers, f32(rng, 64, 11))
    g = f32(rng, 64, 3)
    got = [(np.empty_like(w), np.empty_like(b)) for w, b in layers]
    expected = [(np.empty_like(w), np.empty_like(b)) for w, b in layers]
    numpy_nets.mlp_backward(layers, got, acts, g.copy())
    ref_mlp_backward(layers, expected, acts, g.copy())
    for (gw, gb), (ew, eb) in zip(got, expected, strict=True):
        assert same(gw, ew) and same(gb, eb)


@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_adam_step(uniform, max_norm):
    rng = np.random.default_rng(5)
    counts = np.array([300, 20, 700])
    n = int(counts.sum())
    lr, beta1, beta2, eps = 3e-4, 0.9, 0.999, 1e-5
    state = [f32(rng, n), f32(rng, n, scale=0.01), np.abs(f32(rng, n, scale=1e-4))]
    steps = np.full(3, 7.0) if uniform else np.array([7.0, 3.0, 7.0])
    got, expected = [a.copy() for a in state], [a.copy() for a in state]
    got_steps, expected_steps = steps.copy(), steps.copy()
    for _ in range(5):
        g = f32(rng, n, scale=0.1)
        g_got, g_expected = g.copy(), g.copy()
        ref_adam(g_expected, *expected, max_norm, expected_steps, counts, lr, beta1, beta2, eps)
        # as NumpyLearner._clip_and_adam calls it
        coef = max_norm / (math.sqrt(float(np.dot(g_got, g_got))) + 1e-6)
        got_steps += 1
        if np.all(got_steps == got_steps[0]):
            t = got_steps[0]
            step_size = np.array([lr / (1 - beta1**t)], np.float32)
            bc2 = np.array([math.sqrt(1 - beta2**t)], np.float32)
        else:
            step_size = np.repeat(lr / (1 - beta1**got_steps), counts).astype(np.float32)
            bc2 = np.repeat(np.sqrt(1 - beta2**got_steps), counts).astype(np.float32)
        f = np.float32
        betas = (f(beta1), f(1 - beta1), f(beta2), f(1 - beta2))
        adam_step(g_got, *got, f(coef), coef < 1.0, *betas, step_size, bc2, f(eps))
        assert same(g_got, g_expected)
        for a, b in zip(got, expected, strict=True):
            assert same(a, b)


def test_advance_steps():
    steps = np.array([3.0, 3.0, 3.0])
    assert advance_steps(steps) and same(steps, np.array([4.0, 4.0, 4.0]))
    behind = np.array([4.0, 3.0])
    assert not advance_steps(behind) and same(behind, np.array([5.0, 4.0]))
