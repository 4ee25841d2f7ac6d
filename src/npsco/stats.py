"""Statistics for reporting populations of policies: the paper's numbers and robust aggregates.

Everything here is a pure function of arrays of numbers:

- ``mean_std``: the paper's "mean +- std" (Table 1, Fig. 3), with the population std (``ddof=0``).
- ``iqm``, ``bootstrap_ci``, ``stratified_bootstrap_ci``: the interquartile mean with percentile (or BCa) bootstrap
  confidence intervals, following rliable (Agarwal et al., 2021), computed with ``scipy.stats.bootstrap``.
- ``success_flags`` / ``success_rate``: the paper's success criterion (Sec. 4.2).
- ``relative_novelty``: novelty in units of the PPO references' mean novelty or mean distance (Fig. 3).
- ``state_diversity`` / ``state_diversity_matrix``: a distance between the state distributions two policies visit,
  complementing the action-based novelty (two policies can act differently and still go to the same place).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
from scipy import stats as _scipy_stats

Statistic = Callable[..., np.ndarray | float]
"""A reduction ``statistic(x, axis=...)`` like ``np.mean``; one without an ``axis`` parameter is applied along it."""

_BOOTSTRAP_MEMORY = 4_000_000
"""Upper bound on the number of resampled values held at once (sets scipy's ``batch``)."""


class Estimate(NamedTuple):
    """A point estimate with a confidence interval ``[low, high]``."""

    point: float
    low: float
    high: float


def _as_1d(x: np.ndarray | Sequence[float], name: str = "x") -> np.ndarray:
    """Flatten to a float array, refusing empty input."""
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    return arr


def mean_std(x: np.ndarray | Sequence[float]) -> tuple[float, float]:
    """Mean and standard deviation as the paper reports them ("mean +- std" over policies).

    The std is the *population* standard deviation (``ddof=0``, numpy's default), which is what ``np.std`` gives and
    what the authors' scripts printed; with 10 policies it is about 5% smaller than the sample std (``ddof=1``).
    """
    arr = _as_1d(x)
    return float(arr.mean()), float(arr.std(ddof=0))


def iqm(x: np.ndarray | Sequence[float], axis: int | None = None) -> np.ndarray | float:
    """Interquartile mean: the mean of the middle 50% of the values.

    Same convention as rliable, ``scipy.stats.trim_mean(x, 0.25)``: ``floor(0.25 * n)`` values are cut from each end
    of the sorted data (so for n < 4 nothing is cut and this is the plain mean). ``axis=None`` pools all values.
    """
    result = _scipy_stats.trim_mean(np.asarray(x, dtype=float), 0.25, axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def _with_axis(statistic: Statistic) -> Statistic:
    """Return ``statistic`` as a reduction that accepts ``axis`` (as scipy's vectorised bootstrap calls it)."""
    try:
        takes_axis = "axis" in inspect.signature(statistic).parameters
    except (TypeError, ValueError):  # some builtins have no inspectable signature
        takes_axis = False
    if takes_axis:
        return statistic
    return lambda x, axis=-1: np.apply_along_axis(statistic, axis, x)


def _percentile_or_bca(method: str) -> str:
    if method not in ("percentile", "BCa"):
        raise ValueError(f"method must be 'percentile' or 'BCa', got {method!r}")
    return method


def _finite_or_point(low: float, high: float, point: float) -> tuple[float, float]:
    """Replace an undefined interval (a degenerate bootstrap distribution under BCa) by the point value."""
    if math.isfinite(low) and math.isfinite(high):
        return low, high
    return point, point


def bootstrap_ci(
    x: np.ndarray | Sequence[float],
    statistic: Statistic = iqm,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    method: str = "percentile",
) -> tuple[float, float]:
    """Bootstrap confidence interval ``(low, high)`` of ``statistic`` over the values of ``x``.

    ``method`` is ``"percentile"`` (rliable's default) or ``"BCa"``. Degenerate inputs have no sampling variability
    to estimate, so the interval collapses to the point value ``statistic(x)`` (as both bounds) instead of raising:
    a single value, all values equal, or (BCa only) a bootstrap distribution that is constant.
    """
    arr = _as_1d(x)
    reduce = _with_axis(statistic)
    point = float(reduce(arr, axis=-1))
    if arr.size < 2 or np.all(arr == arr[0]):
        return point, point
    result = _scipy_stats.bootstrap(
        (arr,),
        reduce,
        n_resamples=n_resamples,
        batch=max(1, _BOOTSTRAP_MEMORY // arr.size),
        vectorized=True,
        axis=-1,
        confidence_level=confidence,
        method=_percentile_or_bca(method),
        rng=np.random.default_rng(seed),
    )
    return _finite_or_point(float(result.confidence_interval.low), float(result.confidence_interval.high), point)


def stratified_bootstrap_ci(
    scores_per_task: Mapping[str, np.ndarray | Sequence[float]],
    statistic: Statistic = iqm,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    method: str = "percentile",
) -> Estimate:
    """Point estimate and stratified-bootstrap confidence interval of ``statistic`` over several tasks' scores.

    This is rliable's stratified bootstrap: each bootstrap replicate resamples the runs *within each task*
    independently (with replacement, keeping each task's number of runs), then computes ``statistic`` over the pooled
    resampled scores of all tasks. ``scipy.stats.bootstrap`` with one sample per task and ``paired=False`` resamples
    each sample independently, which is exactly that. Scores should be on comparable scales across tasks (e.g.
    normalised by a per-task baseline) for the pooled statistic to mean something.

    A task with a single run contributes its one value to every replicate (its only possible resample). When no
    task has two or more runs, or all pooled scores are equal, the interval collapses to the point value.
    """
    if not scores_per_task:
        raise ValueError("scores_per_task is empty")
    samples = [_as_1d(scores, f"scores of task {task!r}") for task, scores in scores_per_task.items()]
    pooled = np.concatenate(samples)
    reduce = _with_axis(statistic)
    point = float(reduce(pooled, axis=-1))
    resampled = [s for s in samples if s.size >= 2]
    fixed = np.concatenate([s for s in samples if s.size < 2] or [np.empty(0)])
    if not resampled or np.all(pooled == pooled[0]):
        return Estimate(point, point, point)

    def pooled_statistic(*task_samples: np.ndarray, axis: int = -1) -> np.ndarray | float:
        batch_shape = np.shape(task_samples[0])[:-1]
        constant = np.broadcast_to(fixed, batch_shape + fixed.shape)
        return reduce(np.concatenate([*task_samples, constant], axis=-1), axis=-1)

    result = _scipy_stats.bootstrap(
        tuple(resampled),
        pooled_statistic,
        n_resamples=n_resamples,
        batch=max(1, _BOOTSTRAP_MEMORY // pooled.size),
        vectorized=True,
        paired=False,
        axis=-1,
        confidence_level=confidence,
        method=_percentile_or_bca(method),
        rng=np.random.default_rng(seed),
    )
    low, high = _finite_or_point(float(result.confidence_interval.low), float(result.confidence_interval.high), point)
    return Estimate(point, low, high)


def success_baseline(ppo_final_returns: np.ndarray | Sequence[float]) -> float:
    """The paper's success baseline: the **median** of the PPO reference policies' final returns (Sec. 4.2)."""
    return float(np.median(_as_1d(ppo_final_returns, "ppo_final_returns")))


def success_flags(
    eval_curves: Sequence[np.ndarray | Sequence[float]],
    ppo_final_returns: np.ndarray | Sequence[float],
) -> np.ndarray:
    """Whether each policy succeeded, by the paper's definition (Sec. 4.2).

    A policy succeeds if its evaluation curve (its returns at the evaluations made during its training) reached at
    least the baseline, ``success_baseline(ppo_final_returns)`` = median of the PPO references' final returns, at some
    evaluation. NaN evaluations never count as reached.

    Note: the authors' code used a different rule: the *mean* of the PPO returns as the baseline, and additionally
    required the fraction of episodes ended by the novelty constraint to be below 0.1. We follow the paper's text.
    The paper says PPO's success rate is 0.5 "by definition"; that holds only when PPO is scored on its final
    returns, whereas scoring a PPO run's whole curve by this rule can give more.

    Returns a boolean array with one flag per curve.
    """
    baseline = success_baseline(ppo_final_returns)
    return np.array(
        [bool(np.any(_as_1d(curve, f"eval_curves[{i}]") >= baseline)) for i, curve in enumerate(eval_curves)],
        dtype=bool,
    )


def success_rate(
    eval_curves: Sequence[np.ndarray | Sequence[float]],
    ppo_final_returns: np.ndarray | Sequence[float],
) -> float:
    """Fraction of policies that succeeded (mean of ``success_flags``); Table 1's "Success Rate"."""
    flags = success_flags(eval_curves, ppo_final_returns)
    if flags.size == 0:
        raise ValueError("eval_curves is empty")
    return float(flags.mean())


def relative_novelty(novelty: np.ndarray | float, ppo_baseline: float) -> np.ndarray | float:
    """Novelty in units of a PPO baseline (paper Fig. 3): the mean novelty of the PPO references (each one's distance
    to its nearest other reference; the paper's normalisation) or their mean pairwise distance (npsco's other one).

    A value of 1 means "as novel as a PPO seed is", resp. "as different as two PPO seeds are on average". Raises
    ``ValueError`` if ``ppo_baseline`` is not a positive finite number (e.g. all PPO references identical).
    """
    denominator = float(ppo_baseline)
    if not (math.isfinite(denominator) and denominator > 0):
        raise ValueError(f"the PPO baseline of relative novelty must be positive and finite, got {ppo_baseline!r}")
    result = np.asarray(novelty, dtype=float) / denominator
    return float(result) if result.ndim == 0 else result


def _as_states(states: np.ndarray, name: str) -> np.ndarray:
    """States as a float array of shape (n, d); a 1-D array is n one-dimensional states."""
    arr = np.asarray(states, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty (n, d) array, got shape {np.shape(states)}")
    return arr


def state_diversity(
    states_a: np.ndarray,
    states_b: np.ndarray,
    n_projections: int = 64,
    seed: int = 0,
) -> float:
    """Distance between the distributions of states visited by two policies (sliced Wasserstein-1).

    Both sets of shape (n, d) and (m, d) are first standardised with the mean and std of the *pooled* set (per
    dimension; a constant dimension is only centred), so that dimensions with large units do not dominate and the
    result is symmetric. Both are then projected onto ``n_projections`` random unit directions (drawn from
    ``seed``, the same for every pair), and the 1-D Wasserstein-1 distances between the projected empirical
    distributions are averaged. The result is 0 for identical sets, symmetric in its arguments, and grows as the
    distributions separate. Being in units of the pooled std, it saturates once the separation dominates the pooled
    spread: shifting one set along a dimension by any amount gives less than 2 along that dimension.
    """
    a = _as_states(states_a, "states_a")
    b = _as_states(states_b, "states_b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"state dimensions differ: {a.shape[1]} vs {b.shape[1]}")
    if n_projections < 1:
        raise ValueError("n_projections must be at least 1")
    pooled = np.concatenate([a, b])
    mean = pooled.mean(axis=0)
    std = pooled.std(axis=0)
    std[std == 0] = 1.0
    a, b = (a - mean) / std, (b - mean) / std
    directions = np.random.default_rng(seed).standard_normal((n_projections, a.shape[1]))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    proj_a, proj_b = a @ directions.T, b @ directions.T
    distances = [_scipy_stats.wasserstein_distance(proj_a[:, k], proj_b[:, k]) for k in range(n_projections)]
    return float(np.mean(distances))


def state_diversity_matrix(
    states: Sequence[np.ndarray],
    n_projections: int = 64,
    seed: int = 0,
) -> np.ndarray:
    """Symmetric matrix of ``state_diversity`` between every pair of state sets, with a zero diagonal."""
    n = len(states)
    matrix = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            matrix[i, j] = matrix[j, i] = state_diversity(states[i], states[j], n_projections, seed)
    return matrix
