"""Exact-number and property tests for npsco.stats."""

import math
from itertools import pairwise

import numpy as np
import pytest

from npsco.stats import (
    Estimate,
    bootstrap_ci,
    iqm,
    mean_std,
    relative_novelty,
    state_diversity,
    state_diversity_matrix,
    stratified_bootstrap_ci,
    success_baseline,
    success_flags,
    success_rate,
)


def test_mean_std_uses_population_std():
    mean, std = mean_std([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    assert std == pytest.approx(math.sqrt(1.25))


def test_mean_std_rejects_empty():
    with pytest.raises(ValueError):
        mean_std([])


def test_iqm_of_known_arrays():
    # sorted: -50 1 2 3 4 5 10 100; floor(0.25 * 8) = 2 cut from each end -> mean(2, 3, 4, 5)
    assert iqm([10, 1, 100, 2, 3, -50, 4, 5]) == pytest.approx(3.5)
    # n = 10: 2 cut from each end -> mean(3..8)
    assert iqm(np.arange(1, 11)) == pytest.approx(5.5)
    # fewer than 4 values: nothing cut
    assert iqm([1.0, 2.0, 9.0]) == pytest.approx(4.0)


def test_iqm_along_axis():
    x = np.array([[1, 2, 3, 100], [0, 0, 4, 4]], dtype=float)
    np.testing.assert_allclose(iqm(x, axis=1), [2.5, 2.0])


def test_bootstrap_ci_contains_true_iqm_and_shrinks_with_data():
    rng = np.random.default_rng(1)
    small = rng.normal(3.0, 1.0, size=100)
    large = rng.normal(3.0, 1.0, size=2000)
    low_s, high_s = bootstrap_ci(small)
    low_l, high_l = bootstrap_ci(large)
    assert low_l < 3.0 < high_l  # IQM of a symmetric distribution is its centre
    assert low_l <= iqm(large) <= high_l
    assert high_l - low_l < 0.5 * (high_s - low_s)  # width ~ 1/sqrt(n): ratio ~0.22


def test_bootstrap_ci_bca_and_reproducible():
    x = np.random.default_rng(2).exponential(size=200)
    low, high = bootstrap_ci(x, statistic=np.mean, method="BCa", n_resamples=1000)
    assert low < x.mean() < high
    assert bootstrap_ci(x, seed=5) == bootstrap_ci(x, seed=5)


def test_bootstrap_ci_accepts_statistic_without_axis():
    x = np.random.default_rng(3).normal(size=50)
    with_axis = bootstrap_ci(x, statistic=np.median, n_resamples=500)
    without_axis = bootstrap_ci(x, statistic=lambda v: float(np.median(v)), n_resamples=500)
    assert with_axis == pytest.approx(without_axis)


@pytest.mark.parametrize("x", [[4.2], [7.0, 7.0, 7.0, 7.0]])
@pytest.mark.parametrize("method", ["percentile", "BCa"])
def test_bootstrap_ci_degenerate_inputs_collapse_to_point(x, method):
    assert bootstrap_ci(x, method=method) == (x[0], x[0])


def test_bootstrap_ci_rejects_unknown_method():
    with pytest.raises(ValueError, match="method"):
        bootstrap_ci([1.0, 2.0, 3.0], method="basic")


def test_stratified_bootstrap_resamples_within_each_task():
    # Task A is all 0, task B all 1, five runs each. Resampling within each task keeps five 0s and five 1s in every
    # replicate, so the pooled mean is exactly 0.5 in all of them; pooling before resampling would vary it.
    scores = {"a": np.zeros(5), "b": np.ones(5)}
    for method in ("percentile", "BCa"):
        assert stratified_bootstrap_ci(scores, statistic=np.mean, method=method) == Estimate(0.5, 0.5, 0.5)
    low, high = bootstrap_ci(np.concatenate([np.zeros(5), np.ones(5)]), statistic=np.mean)
    assert high - low > 0.3


def test_stratified_bootstrap_matches_a_direct_implementation():
    rng = np.random.default_rng(4)
    scores = {"hopper": rng.normal(1.0, 0.5, size=10), "walker": rng.normal(2.0, 1.0, size=7)}
    estimate = stratified_bootstrap_ci(scores, n_resamples=4000)
    assert estimate.point == pytest.approx(iqm(np.concatenate(list(scores.values()))))
    # Direct implementation of rliable's stratified bootstrap with numpy.
    draw = np.random.default_rng(99)
    replicates = [
        iqm(np.concatenate([s[draw.integers(0, s.size, s.size)] for s in scores.values()])) for _ in range(4000)
    ]
    low, high = np.percentile(replicates, [2.5, 97.5])
    width = high - low
    assert estimate.low == pytest.approx(low, abs=0.1 * width)
    assert estimate.high == pytest.approx(high, abs=0.1 * width)
    assert estimate.low < estimate.point < estimate.high


def test_stratified_bootstrap_with_single_run_tasks():
    only_single = stratified_bootstrap_ci({"a": [1.0], "b": [3.0]}, statistic=np.mean)
    assert only_single == Estimate(2.0, 2.0, 2.0)
    mixed = stratified_bootstrap_ci({"a": [10.0], "b": [0.0, 1.0, 2.0, 3.0]}, statistic=np.mean, n_resamples=500)
    assert mixed.point == pytest.approx(3.2)
    assert 2.0 <= mixed.low < 3.2 < mixed.high <= 4.4  # task a's 10 is in every replicate
    with pytest.raises(ValueError):
        stratified_bootstrap_ci({})


def test_success_uses_median_of_an_even_number_of_ppo_returns():
    ppo = [1.0, 10.0, 2.0, 3.0]  # median 2.5 (the mean, 4.0, would be the authors' code)
    assert success_baseline(ppo) == 2.5
    curves = [
        np.array([0.0, 1.0, 2.4]),  # never reached
        np.array([0.0, 2.5, 1.0]),  # reached exactly at the middle evaluation, then dropped
        np.array([np.nan, 3.0]),  # NaN ignored, 3 >= 2.5
        np.array([5.0]),
    ]
    np.testing.assert_array_equal(success_flags(curves, ppo), [False, True, True, True])
    assert success_rate(curves, ppo) == 0.75


def test_success_with_odd_number_of_ppo_returns():
    ppo = [3.0, 1.0, 2.0]
    assert success_rate([[1.9], [2.0, 0.0]], ppo) == 0.5


def test_success_rejects_empty_inputs():
    with pytest.raises(ValueError):
        success_flags([[]], [1.0])
    with pytest.raises(ValueError):
        success_flags([[1.0]], [])
    with pytest.raises(ValueError):
        success_rate([], [1.0])


def test_relative_novelty():
    assert relative_novelty(0.6, 0.3) == pytest.approx(2.0)
    np.testing.assert_allclose(relative_novelty(np.array([0.15, 0.3, 0.45]), 0.3), [0.5, 1.0, 1.5])


@pytest.mark.parametrize("denominator", [0.0, -0.2, float("nan"), float("inf")])
def test_relative_novelty_rejects_bad_denominator(denominator):
    with pytest.raises(ValueError, match="PPO"):
        relative_novelty(0.5, denominator)


def _states(seed: int, n: int = 300, d: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d))


def test_state_diversity_zero_on_identical_and_permuted_sets():
    a = _states(0)
    assert state_diversity(a, a) == 0.0
    assert state_diversity(a, a[::-1]) == pytest.approx(0.0, abs=1e-12)


def test_state_diversity_symmetric():
    a, b = _states(0), _states(1, n=200) + 0.5
    assert state_diversity(a, b) == pytest.approx(state_diversity(b, a))


def test_state_diversity_monotone_in_a_shift():
    a = _states(0)
    shift = np.array([1.0, -0.5, 0.2])
    values = [state_diversity(a, a + k * shift) for k in (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)]
    assert values[0] == 0.0
    assert all(x < y for x, y in pairwise(values))


def test_state_diversity_is_scale_free_and_handles_constant_dimensions():
    a, b = _states(0), _states(1) + 1.0
    scale = np.array([1.0, 100.0, 0.01])
    assert state_diversity(a * scale, b * scale) == pytest.approx(state_diversity(a, b))
    flat_a = np.column_stack([a[:, 0], np.zeros(len(a))])
    flat_b = np.column_stack([b[:, 0], np.zeros(len(b))])
    assert math.isfinite(state_diversity(flat_a, flat_b))
    assert state_diversity(a[:, 0], a[:, 0]) == 0.0  # 1-D input is n one-dimensional states


def test_state_diversity_rejects_bad_shapes():
    with pytest.raises(ValueError, match="dimensions"):
        state_diversity(_states(0, d=2), _states(1, d=3))
    with pytest.raises(ValueError):
        state_diversity(np.empty((0, 2)), _states(1, d=2))


def test_state_diversity_matrix():
    sets = [_states(0), _states(1) + 2.0, _states(2) - 1.0]
    matrix = state_diversity_matrix(sets, n_projections=16)
    assert matrix.shape == (3, 3)
    np.testing.assert_array_equal(np.diag(matrix), 0.0)
    np.testing.assert_array_equal(matrix, matrix.T)
    assert matrix[0, 1] == pytest.approx(state_diversity(sets[0], sets[1], n_projections=16))
    assert (matrix[~np.eye(3, dtype=bool)] > 0).all()
