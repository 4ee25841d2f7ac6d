"""Policy distances and novelty: exact numbers, metric properties and the pairwise matrix on hand-made policies."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.linalg import sqrtm
from scipy.stats import norm

from npsco.novelty.metrics import (
    deterministic_distance,
    mean_pairwise_distance,
    novelty,
    pairwise_distance_matrix,
    per_state_distance,
    policy_distance,
    running_novelty,
    wasserstein2_distance,
)

# ---------------------------------------------------------------------------------------------- exact numbers


def test_deterministic_distance_is_euclidean_norm_not_squared_not_averaged():
    assert deterministic_distance([0.0, 0.0], [3.0, 4.0]) == pytest.approx(5.0)
    assert deterministic_distance([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) == 0.0
    assert deterministic_distance([0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]) == pytest.approx(2.0)


def test_deterministic_distance_broadcasts_over_leading_axes():
    states = np.array([[0.0, 0.0], [1.0, 1.0], [6.0, 8.0]])
    out = deterministic_distance(states, np.zeros(2))
    np.testing.assert_allclose(out, [0.0, np.sqrt(2.0), 10.0])
    batch = np.zeros((2, 3, 2))
    batch[1, 2] = [3.0, 4.0]
    out = deterministic_distance(batch, np.zeros((1, 3, 2)))
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, [[0, 0, 0], [0, 0, 5]])


def test_wasserstein2_exact_3_4_5():
    # means differ by 3 in one dimension, stds by 4 in the other.
    out = wasserstein2_distance([3.0, 0.0], [1.0, 5.0], [0.0, 0.0], [1.0, 1.0])
    assert out == pytest.approx(5.0)


def test_wasserstein2_with_equal_stds_is_the_deterministic_distance():
    rng = np.random.default_rng(0)
    m_a, m_b = rng.normal(size=(2, 7, 3))
    std = rng.uniform(0.1, 2.0, size=(7, 3))
    np.testing.assert_allclose(wasserstein2_distance(m_a, std, m_b, std), deterministic_distance(m_a, m_b))


def test_wasserstein2_matches_the_general_gaussian_formula_with_diagonal_covariances():
    """The paper's ||m1 - m2||^2 + tr[S1 + S2 - 2 (S1^1/2 S2 S1^1/2)^1/2], with S = diag(std^2)."""
    rng = np.random.default_rng(1)
    m1, m2 = rng.normal(size=(2, 4))
    s1, s2 = rng.uniform(0.1, 3.0, size=(2, 4))
    cov1, cov2 = np.diag(s1**2), np.diag(s2**2)
    root1 = sqrtm(cov1).real
    trace_term = np.trace(cov1 + cov2 - 2.0 * sqrtm(root1 @ cov2 @ root1).real)
    expected = np.sqrt(np.sum((m1 - m2) ** 2) + trace_term)
    assert wasserstein2_distance(m1, s1, m2, s2) == pytest.approx(expected, rel=1e-9)


def test_wasserstein2_in_1d_matches_the_quantile_integral():
    """W2^2 between 1-D laws = integral over u in (0, 1) of (F1^-1(u) - F2^-1(u))^2."""
    u = (np.arange(200_000) + 0.5) / 200_000
    quantiles_1 = norm.ppf(u, loc=0.3, scale=1.7)
    quantiles_2 = norm.ppf(u, loc=-1.1, scale=0.4)
    numeric = np.sqrt(np.mean((quantiles_1 - quantiles_2) ** 2))
    assert wasserstein2_distance([0.3], [1.7], [-1.1], [0.4]) == pytest.approx(numeric, rel=1e-3)


def test_wasserstein2_rejects_negative_std():
    with pytest.raises(ValueError, match="non-negative"):
        wasserstein2_distance([0.0], [-1.0], [0.0], [1.0])


def test_per_state_distance_dispatches_and_rejects_unknown_metric():
    a, b = np.array([[0.0, 0.0]]), np.array([[3.0, 4.0]])
    np.testing.assert_allclose(per_state_distance(a, b), [5.0])
    std = np.ones((1, 2))
    np.testing.assert_allclose(per_state_distance((a, std), (b, std), "wasserstein2"), [5.0])
    with pytest.raises(ValueError, match="unknown metric"):
        per_state_distance(a, b, "kl")  # type: ignore[arg-type]


def test_policy_distance_is_mean_per_state_distance():
    actions_i = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    actions_j = np.array([[3.0, 4.0], [1.0, 1.0], [2.0, 1.0]])  # per-state distances 5, 0, 1
    assert policy_distance(actions_i, actions_j) == pytest.approx(2.0)
    std_i, std_j = np.zeros((3, 2)), np.zeros((3, 2))
    std_j[1] = [3.0, 4.0]  # adds 5 at the second state: distances 5, 5, 1
    d = policy_distance((actions_i, std_i), (actions_j, std_j), metric="wasserstein2")
    assert d == pytest.approx(11.0 / 3.0)
    with pytest.raises(ValueError, match="at least one state"):
        policy_distance(np.zeros((0, 2)), np.zeros((0, 2)))


def test_novelty_is_min_over_references():
    assert novelty([0.7, 0.2, 0.9]) == pytest.approx(0.2)
    assert isinstance(novelty([0.7]), float)
    np.testing.assert_allclose(novelty([[0.7, 0.2], [0.1, 0.3]]), [0.2, 0.1])
    with pytest.raises(ValueError, match="M = 0"):
        novelty([])


# ------------------------------------------------------------------------------------ pairwise matrix, r0


def _linear_policy(weight):
    weight = np.asarray(weight, dtype=np.float64)
    return lambda states: np.asarray(states) @ weight.T


def test_pairwise_distance_matrix_on_linear_policies_by_hand():
    # pi_0(s) = s, pi_1(s) = 2 s, pi_2(s) = 0 (2-D states and actions).
    policies = [_linear_policy(np.eye(2)), _linear_policy(2.0 * np.eye(2)), _linear_policy(np.zeros((2, 2)))]
    visited = [
        np.array([[3.0, 4.0], [0.0, 1.0]]),  # |s| = 5, 1: mean 3
        np.array([[1.0, 0.0]]),  # |s| = 1
        np.array([[0.0, 2.0], [6.0, 8.0]]),  # |s| = 2, 10: mean 6
    ]
    # Row i uses i's states: ||pi_i(s) - pi_j(s)|| = |c_i - c_j| |s| with c = (1, 2, 0).
    expected = np.array(
        [
            [0.0, 1.0 * 3.0, 1.0 * 3.0],
            [1.0 * 1.0, 0.0, 2.0 * 1.0],
            [1.0 * 6.0, 2.0 * 6.0, 0.0],
        ]
    )
    matrix = pairwise_distance_matrix(policies, visited)
    np.testing.assert_allclose(matrix, expected)
    assert not np.allclose(matrix, matrix.T)  # each row is measured on its own policy's states
    # mean of the 6 off-diagonal entries: (3 + 3 + 1 + 2 + 6 + 12) / 6
    assert mean_pairwise_distance(matrix) == pytest.approx(27.0 / 6.0)


def test_pairwise_distance_matrix_wasserstein2():
    def gaussian(scale, std):
        return lambda states: (scale * np.asarray(states), np.full(np.shape(states), std))

    policies = [gaussian(1.0, 1.0), gaussian(1.0, 4.0)]  # same means; stds differ by 3 per dimension
    visited = [np.zeros((2, 2)), np.ones((1, 2))]
    matrix = pairwise_distance_matrix(policies, visited, metric="wasserstein2")
    np.testing.assert_allclose(matrix, [[0.0, 3.0 * np.sqrt(2.0)], [3.0 * np.sqrt(2.0), 0.0]])


def test_pairwise_distance_matrix_checks_lengths():
    with pytest.raises(ValueError, match="2 policies but 1"):
        pairwise_distance_matrix([_linear_policy(np.eye(2))] * 2, [np.zeros((1, 2))])


def test_mean_pairwise_distance_validates_input():
    with pytest.raises(ValueError, match="at least 2"):
        mean_pairwise_distance([[0.0]])
    with pytest.raises(ValueError, match="square"):
        mean_pairwise_distance([[0.0, 1.0]])
    assert mean_pairwise_distance([[0.0, 1.0], [3.0, 0.0]]) == pytest.approx(2.0)


# ------------------------------------------------------------------------------------------ running novelty


def test_running_novelty_by_hand():
    d = np.array(
        [
            [1.0, 4.0],
            [3.0, 0.0],
            [5.0, 2.0],
            [7.0, 2.0],
        ]
    )
    # running means: ref 0: 1, 2, 3, 4; ref 1: 4, 2, 2, 2.
    np.testing.assert_allclose(running_novelty(d), [1.0, 2.0, 2.0, 2.0])


def test_running_novelty_validates_shape():
    with pytest.raises(ValueError, match="M = 0"):
        running_novelty(np.zeros((3, 0)))
    with pytest.raises(ValueError, match=r"\(T, M\)"):
        running_novelty(np.zeros(3))
    assert running_novelty(np.zeros((0, 2))).shape == (0,)


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(1, 4)), elements=st.floats(0, 10)))
def test_running_novelty_last_step_is_episode_novelty(d):
    out = running_novelty(d)
    assert out.shape == (d.shape[0],)
    assert out[-1] == pytest.approx(novelty(d.mean(axis=0)), abs=1e-12)


# ------------------------------------------------------------------------------- metric properties (hypothesis)

_FLOATS = st.floats(-100.0, 100.0, allow_nan=False, allow_infinity=False)
_STDS = st.floats(0.0, 10.0, allow_nan=False, allow_infinity=False)


@st.composite
def _three_policies(draw):
    """Actions of three policies at the same N states: (means, stds), each of shape (3, N, A)."""
    n, a = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    means = draw(arrays(np.float64, (3, n, a), elements=_FLOATS))
    stds = draw(arrays(np.float64, (3, n, a), elements=_STDS))
    return means, stds


def _both_metrics(means, stds):
    """Per-state distance functions d(k, j) between policies k, j, for each metric."""
    return {
        "deterministic": lambda k, j: deterministic_distance(means[k], means[j]),
        "wasserstein2": lambda k, j: wasserstein2_distance(means[k], stds[k], means[j], stds[j]),
    }


@settings(max_examples=60, deadline=None)
@given(_three_policies())
def test_metric_axioms_per_state_and_on_average(policies):
    means, stds = policies
    for d in _both_metrics(means, stds).values():
        tol = 1e-9 * (1.0 + np.abs(means).max() + stds.max())
        assert np.all(d(0, 0) == 0.0)
        assert np.all(d(0, 1) >= 0.0)
        np.testing.assert_allclose(d(0, 1), d(1, 0))
        assert np.all(d(0, 2) <= d(0, 1) + d(1, 2) + tol)
        # the mean over a fixed set of states (Proposition 1) is a metric too
        mean_d = {(k, j): d(k, j).mean() for k in range(3) for j in range(3)}
        assert mean_d[(0, 2)] <= mean_d[(0, 1)] + mean_d[(1, 2)] + tol
        assert mean_d[(0, 1)] == pytest.approx(mean_d[(1, 0)])


@settings(max_examples=40, deadline=None)
@given(_three_policies())
def test_policy_distance_matches_mean_of_per_state_distances(policies):
    means, stds = policies
    expected = wasserstein2_distance(means[0], stds[0], means[1], stds[1]).mean()
    got = policy_distance((means[0], stds[0]), (means[1], stds[1]), metric="wasserstein2")
    assert got == pytest.approx(expected)
    assert policy_distance(means[0], means[0]) == 0.0


@given(
    arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 3)), elements=st.floats(0, 10)),
    st.floats(0.05, 1.0),
)
def test_discounted_running_mean_is_a_weighted_mean_of_the_past(d, g):
    from npsco.novelty.metrics import running_mean

    out = running_mean(d, g)
    t = len(d) - 1
    weights = g ** np.arange(t, -1, -1)
    np.testing.assert_allclose(out[-1], weights @ d / weights.sum(), rtol=1e-9, atol=1e-12)
    assert np.all(out >= d.min(0) - 1e-9) and np.all(out <= d.max(0) + 1e-9)  # a mean stays within the values
    if g == 1.0:
        np.testing.assert_allclose(out, np.cumsum(d, 0) / np.arange(1, len(d) + 1)[:, None])
