"""Bisector, conjugate gradient, CPO's analytic step and the flat-parameter helpers."""

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from npsco.methods.constrained import (
    TNB_RULES,
    CPOStepInfo,
    bisector,
    conjugate_gradient,
    cpo_step,
    flat_grad,
    get_flat_params,
    norm,
    set_flat_params,
)


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def assert_close(actual: torch.Tensor, expected, atol: float = 1e-12) -> None:
    np.testing.assert_allclose(actual.numpy(), np.asarray(expected, dtype=np.float64), rtol=1e-10, atol=atol)


SQRT2 = math.sqrt(2.0)

# ------------------------------------------------------------------------------------------------- bisector


@pytest.mark.parametrize("rule", ["authors", "safe"])
def test_acute_is_the_bisector_with_stride_mean_of_norms(rule):
    # f along x, g at 45 degrees: the bisector is at 22.5 degrees.
    p = bisector(t(3.0, 0.0), t(1.0, 1.0), rule=rule)
    stride = (3.0 + SQRT2) / 2.0
    assert_close(p, [stride * math.cos(math.pi / 8), stride * math.sin(math.pi / 8)])


def test_authors_is_the_default_rule():
    f, g = t(2.0, 0.0), t(-1.0, 1.0)
    assert_close(bisector(f, g), bisector(f, g, rule="authors").numpy())


def test_authors_obtuse_is_the_task_gradient_made_orthogonal_to_novelty():
    # f = (2, 0), g = (-1, 1): f_perp = (1, 1), p = L (1, 1) / sqrt 2 with L = (2 + sqrt 2) / 2.
    p = bisector(t(2.0, 0.0), t(-1.0, 1.0), rule="authors")
    assert_close(p, [(SQRT2 + 1.0) / 2.0, (SQRT2 + 1.0) / 2.0])
    # 120 degrees: f = (1, 0), g = (-1/2, sqrt3/2): f_perp = (3/4, sqrt3/4), L = 1, so p = (sqrt3/2, 1/2).
    g = t(-0.5, math.sqrt(3.0) / 2.0)
    p = bisector(t(1.0, 0.0), g, rule="authors")
    assert_close(p, [math.sqrt(3.0) / 2.0, 0.5])
    assert abs(torch.dot(p, g).item()) < 1e-15  # neutral for novelty; not g made orthogonal to f (p . f would be 0)
    assert torch.dot(p, t(1.0, 0.0)).item() == pytest.approx(math.sqrt(3.0) / 2.0)  # L |f| sin 120 degrees


def test_authors_right_angle_follows_the_task_and_is_not_continuous_there():
    # cos = 0 takes the obtuse branch: f_perp = f; just below 90 degrees the acute branch bisects, as the authors' code.
    assert_close(bisector(t(1.0, 0.0), t(0.0, 3.0), rule="authors"), [2.0, 0.0])
    assert_close(bisector(t(1.0, 0.0), t(1e-9, 3.0), rule="authors"), [2.0 / SQRT2, 2.0 / SQRT2], atol=1e-8)


def test_safe_obtuse_removes_the_component_against_novelty_then_bisects():
    # f = (2, 0), g = (-1, 1): f_perp = (1, 1), unit(f_perp) + g^ = (0, sqrt 2).
    p = bisector(t(2.0, 0.0), t(-1.0, 1.0), rule="safe")
    assert_close(p, [0.0, (2.0 + SQRT2) / 2.0])
    # 120 degrees: f = (1, 0), g = (-1/2, sqrt3/2); f_perp^ = (sqrt3/2, 1/2), plus g^ = (sqrt3/2 - 1/2, sqrt3/2 + 1/2).
    g = t(-0.5, math.sqrt(3.0) / 2.0)
    direction = np.array([math.sqrt(3.0) / 2.0 - 0.5, math.sqrt(3.0) / 2.0 + 0.5])
    assert_close(bisector(t(1.0, 0.0), g, rule="safe"), direction / np.linalg.norm(direction))


def test_safe_is_continuous_at_right_angle():
    # cos = 0 takes the obtuse branch; it gives the plain bisector.
    assert_close(bisector(t(1.0, 0.0), t(0.0, 3.0), rule="safe"), [2.0 / SQRT2, 2.0 / SQRT2])
    almost = bisector(t(1.0, 0.0), t(1e-9, 3.0), rule="safe")
    assert_close(almost, [2.0 / SQRT2, 2.0 / SQRT2], atol=1e-8)


def test_antiparallel_gradients():
    f, g = t(1.0, 0.0), t(-2.0, 0.0)
    assert_close(bisector(f, g, rule="authors"), [0.0, 0.0])  # nothing helps the task without lowering novelty
    assert_close(bisector(f, g, rule="safe"), [-1.5, 0.0])  # follows novelty
    assert_close(bisector(f, g, rule="paper_eq5"), [2.0, 0.0])  # f + |f| cos g^ = 2 f: against novelty


def test_paper_eq5_by_hand_and_its_old_name():
    assert_close(bisector(t(3.0, 0.0), t(1.0, 1.0), rule="paper_eq5"), [3.0 + 3.0 / SQRT2, 3.0 / SQRT2])
    # obtuse: f + |f|/|g| cos g = (2, 0) + sqrt2 * (-1/sqrt2) * (-1, 1) = (3, -1)
    p = bisector(t(2.0, 0.0), t(-1.0, 1.0), rule="paper_eq5")
    assert_close(p, [3.0, -1.0])
    assert_close(bisector(t(2.0, 0.0), t(-1.0, 1.0), rule="paper"), [3.0, -1.0])  # runs made before the rename


def test_obtuse_step_lowers_keeps_or_raises_novelty_by_rule():
    f, g = t(2.0, 0.0), t(-1.0, 1.0)
    assert torch.dot(bisector(f, g, rule="paper_eq5"), g).item() == pytest.approx(-4.0)  # 2 f . g: lowers novelty
    assert torch.dot(bisector(f, g, rule="authors"), g).item() == pytest.approx(0.0, abs=1e-15)  # neutral
    assert torch.dot(bisector(f, g, rule="safe"), g).item() > 0  # raises it


def test_safe_beyond_135_degrees_goes_against_the_task():
    """Documented behaviour of the safe rule: p . f = L |f| (sin + cos) / sqrt 2 < 0 past 135 degrees."""
    angle = math.radians(160.0)
    f, g = t(1.0, 0.0), t(math.cos(angle), math.sin(angle))
    p = bisector(f, g, rule="safe")
    assert torch.dot(p, f).item() == pytest.approx((math.sin(angle) + math.cos(angle)) / SQRT2)
    assert torch.dot(p, f) < 0 < torch.dot(p, g)
    assert torch.dot(bisector(f, g, rule="authors"), f).item() == pytest.approx(math.sin(angle))  # L |f| sin a > 0


@pytest.mark.parametrize("rule", ["authors", "safe"])
def test_zero_gradients_give_no_nan(rule):
    zero, f, g = t(0.0, 0.0), t(3.0, 4.0), t(0.0, 2.0)
    assert_close(bisector(zero, zero, rule=rule), [0.0, 0.0])
    assert_close(bisector(f, zero, rule=rule), [1.5, 2.0])
    assert_close(bisector(zero, g, rule=rule), [0.0, 1.0])


def test_zero_gradients_paper_eq5():
    zero, f, g = t(0.0, 0.0), t(3.0, 4.0), t(0.0, 2.0)
    assert_close(bisector(f, zero, rule="paper_eq5"), [3.0, 4.0])
    assert_close(bisector(zero, g, rule="paper_eq5"), [0.0, 0.0])
    assert_close(bisector(zero, zero, rule="paper_eq5"), [0.0, 0.0])


def test_bisector_validates_input_and_keeps_dtype():
    with pytest.raises(ValueError, match="same shape"):
        bisector(t(1.0, 0.0), t(1.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="unknown rule"):
        bisector(t(1.0, 0.0), t(0.0, 1.0), rule="other")
    for rule in TNB_RULES:
        p = bisector(torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1e-4]), rule=rule)
        assert p.dtype == torch.float32 and torch.isfinite(p).all()


@st.composite
def _gradient_pair(draw):
    dim = draw(st.integers(2, 50))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    f, g = rng.normal(size=(2, dim)) * rng.uniform(0.01, 100.0, size=(2, 1))
    return torch.from_numpy(f), torch.from_numpy(g)


def _geometry(f: torch.Tensor, g: torch.Tensor) -> tuple[float, float, float, float]:
    """|f|, |g|, the stride L = (|f| + |g|) / 2 and cos(f, g)."""
    f_norm, g_norm = f.norm().item(), g.norm().item()
    return f_norm, g_norm, (f_norm + g_norm) / 2.0, (torch.dot(f, g) / (f_norm * g_norm)).item()


def _parallel(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.dot(a, b).item() == pytest.approx(a.norm().item() * b.norm().item(), rel=1e-9)


@settings(max_examples=80, deadline=None)
@given(_gradient_pair())
def test_the_three_rules_agree_on_the_direction_when_acute(pair):
    f, g = pair
    f_norm, g_norm, stride, cos = _geometry(f, g)
    assume(cos > 1e-6)
    p = bisector(f, g, rule="authors")
    assert p.norm().item() == pytest.approx(stride, rel=1e-9)
    assert torch.dot(p, f).item() > 0 and torch.dot(p, g).item() > 0
    assert_close(bisector(f, g, rule="safe"), p.numpy(), atol=1e-12 * stride)
    assert _parallel(bisector(f, g, rule="paper_eq5"), p)  # the same direction, another length


@settings(max_examples=80, deadline=None)
@given(_gradient_pair())
def test_obtuse_properties_of_each_rule(pair):
    f, g = pair
    f_norm, g_norm, stride, cos = _geometry(f, g)
    assume(cos <= 0)
    sin = math.sqrt(max(0.0, 1.0 - cos * cos))
    f_perp = f - torch.dot(f, g) / g_norm**2 * g

    p = bisector(f, g, rule="authors")  # f made orthogonal to g
    assert p.norm().item() == pytest.approx(stride, rel=1e-9)
    assert torch.dot(p, g).item() == pytest.approx(0.0, abs=1e-9 * stride * g_norm)  # neutral for novelty
    assert torch.dot(p, f).item() == pytest.approx(stride * f_norm * sin, rel=1e-7)  # never against the task
    assert _parallel(p, f_perp)

    p = bisector(f, g, rule="paper_eq5")  # f + (f . g^) g^
    assert torch.dot(p, g).item() == pytest.approx(2.0 * torch.dot(f, g).item(), rel=1e-9, abs=1e-12 * f_norm * g_norm)
    assert torch.dot(p, f).item() == pytest.approx(f_norm**2 * (1.0 + cos * cos), rel=1e-9)

    p = bisector(f, g, rule="safe")  # f_perp bisected with g
    p_f, p_g = torch.dot(p, f).item(), torch.dot(p, g).item()
    assert p.norm().item() == pytest.approx(stride, rel=1e-9)
    assert p_g == pytest.approx(stride * g_norm / SQRT2, rel=1e-9)  # never against novelty
    assert p_f == pytest.approx(stride * f_norm * (sin + cos) / SQRT2, rel=1e-7, abs=1e-9 * stride * f_norm)
    assert torch.dot(p, f_perp).item() >= 0  # the task progress orthogonal to g is kept
    if cos >= -1.0 / SQRT2:
        assert p_f >= -1e-9 * stride * f_norm


# --------------------------------------------------------------------------------------- conjugate gradient


def _random_spd(rng: np.random.Generator, n: int, low: float = 0.5, high: float = 5.0) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (q * rng.uniform(low, high, size=n)) @ q.T


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_conjugate_gradient_is_exact_in_n_iterations(n, seed):
    rng = np.random.default_rng(seed)
    a = _random_spd(rng, n)
    b = rng.normal(size=n)
    a_t = torch.from_numpy(a)
    calls = []

    def avp(v):
        calls.append(1)
        return a_t @ v

    x = conjugate_gradient(avp, torch.from_numpy(b), iters=n, residual_tol=0.0)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-7, atol=1e-9)
    assert len(calls) <= n


def test_conjugate_gradient_stops_early_and_handles_zero_rhs():
    a = torch.diag(t(1.0, 2.0, 3.0, 4.0))
    calls = []

    def avp(v):
        calls.append(1)
        return a @ v

    x = conjugate_gradient(avp, t(0.0, 0.0, 0.0, 0.0))
    assert_close(x, [0.0] * 4)
    assert calls == []
    x = conjugate_gradient(avp, t(2.0, 0.0, 0.0, 0.0), iters=10)  # an eigenvector: solved in one step
    assert_close(x, [2.0, 0.0, 0.0, 0.0])
    assert len(calls) == 1


def test_conjugate_gradient_rejects_indefinite_operator():
    with pytest.raises(ValueError, match="positive definite"):
        conjugate_gradient(lambda v: -v, t(1.0, 2.0))


# ------------------------------------------------------------------------------------------------ CPO step


class Problem:
    """max g.x  s.t.  0.5 x^T H x <= delta,  c + b.x <= 0, with explicit H (numpy, float64)."""

    def __init__(self, h: np.ndarray, g: np.ndarray, b: np.ndarray, c: float, delta: float):
        self.h, self.g, self.b, self.c, self.delta = h, g, b, c, delta
        self.hinv_g, self.hinv_b = np.linalg.solve(h, g), np.linalg.solve(h, b)
        self.q, self.r, self.s = g @ self.hinv_g, g @ self.hinv_b, b @ self.hinv_b

    @classmethod
    def random(cls, seed: int, n: int, c_over_boundary: float, delta: float = 0.01) -> "Problem":
        """c = c_over_boundary * sqrt(2 delta s): |ratio| < 1 keeps the constraint touching the trust region."""
        rng = np.random.default_rng(seed)
        h = _random_spd(rng, n)
        g, b = rng.normal(size=(2, n))
        s = b @ np.linalg.solve(h, b)
        return cls(h, g, b, c_over_boundary * math.sqrt(2.0 * delta * s), delta)

    def solve(self) -> tuple[np.ndarray, CPOStepInfo]:
        g, b, hinv_g, hinv_b = (torch.from_numpy(v) for v in (self.g, self.b, self.hinv_g, self.hinv_b))
        step, info = cpo_step(g, b, self.c, hinv_g, hinv_b, self.delta)
        assert step.dtype == torch.float64
        return step.numpy(), info

    def kl(self, x: np.ndarray) -> float:
        return 0.5 * x @ self.h @ x

    def reference(self) -> np.ndarray:
        """SLSQP from the most feasible point, the recovery step (feasible whenever the problem is)."""
        x0 = -math.sqrt(2.0 * self.delta / self.s) * self.hinv_b
        constraints = [
            {"type": "ineq", "fun": lambda x: self.delta - self.kl(x), "jac": lambda x: -self.h @ x},
            {"type": "ineq", "fun": lambda x: -(self.c + self.b @ x), "jac": lambda x: -self.b},
        ]
        result = minimize(
            lambda x: -self.g @ x,
            x0,
            jac=lambda x: -self.g,
            constraints=constraints,
            method="SLSQP",
            options={"ftol": 1e-13, "maxiter": 500},
        )
        return result.x

    def check_optimal(self, x: np.ndarray, info: CPOStepInfo) -> None:
        """Feasible, KKT conditions with the reported duals, and the SLSQP objective."""
        scale = math.sqrt(2.0 * self.delta * self.s)  # size of b.x over the trust region
        assert self.c + self.b @ x <= 1e-9 * scale
        assert self.kl(x) <= self.delta * (1.0 + 1e-9)
        if info.lam > 0:  # stationarity g = lam H x + nu b, complementary slackness
            residual = self.g - info.lam * self.h @ x - info.nu * self.b
            assert np.linalg.norm(residual) <= 1e-8 * (np.linalg.norm(self.g) + info.nu * np.linalg.norm(self.b))
            assert self.kl(x) == pytest.approx(self.delta, rel=1e-8)
        assert info.nu >= 0
        if info.nu > 0:
            assert self.c + self.b @ x == pytest.approx(0.0, abs=1e-9 * scale)
        x_ref = self.reference()
        objective_scale = math.sqrt(2.0 * self.delta * self.q) + 1e-12  # g.x of the TRPO step
        assert self.g @ x >= self.g @ x_ref - 1e-6 * objective_scale
        assert self.g @ x == pytest.approx(self.g @ x_ref, abs=1e-5 * objective_scale)


def trpo_step(problem: Problem) -> np.ndarray:
    return math.sqrt(2.0 * problem.delta / problem.q) * problem.hinv_g


def test_whole_trust_region_feasible_gives_trpo_step():
    problem = Problem.random(seed=0, n=5, c_over_boundary=-1.5)
    x, info = problem.solve()
    assert info.case == 3 and info.nu == 0.0
    np.testing.assert_allclose(x, trpo_step(problem), rtol=1e-12)
    assert info.lam == pytest.approx(math.sqrt(problem.q / (2.0 * problem.delta)))


def test_inactive_constraint_inside_trust_region_gives_trpo_step():
    # case 2 (feasible now, the trust region crosses the constraint) but the TRPO step satisfies it
    base = Problem.random(seed=8, n=4, c_over_boundary=-0.9)
    problem = Problem(base.h, base.g - base.b, base.b, base.c, base.delta)  # g partly opposed to b
    assert problem.c + problem.b @ trpo_step(problem) < 0
    x, info = problem.solve()
    assert info.case == 2 and info.nu == 0.0
    np.testing.assert_allclose(x, trpo_step(problem), rtol=1e-12)


def test_no_cost_gradient_gives_trpo_step():
    problem = Problem.random(seed=1, n=3, c_over_boundary=0.5)
    for c in (-1.0, 0.0, 2.0):
        step, info = cpo_step(
            torch.from_numpy(problem.g), torch.zeros(3, dtype=torch.float64), c,
            torch.from_numpy(problem.hinv_g), torch.zeros(3, dtype=torch.float64), problem.delta,
        )  # fmt: skip
        assert info.case == 4
        np.testing.assert_allclose(step.numpy(), trpo_step(problem), rtol=1e-12)


def test_infeasible_gives_recovery_step():
    problem = Problem.random(seed=2, n=6, c_over_boundary=1.3)
    x, info = problem.solve()
    assert info.case == 0
    np.testing.assert_allclose(x, -math.sqrt(2.0 * problem.delta / problem.s) * problem.hinv_b, rtol=1e-12)
    assert problem.b @ x < 0
    assert problem.kl(x) == pytest.approx(problem.delta, rel=1e-12)
    assert info.nu == pytest.approx(math.sqrt(2.0 * problem.delta / problem.s))


@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.99])
def test_infeasible_current_point_feasible_step(ratio):
    problem = Problem.random(seed=3, n=7, c_over_boundary=ratio)
    x, info = problem.solve()
    assert info.case == 1
    problem.check_optimal(x, info)


@pytest.mark.parametrize("ratio", [-0.99, -0.5, -0.05])
def test_feasible_current_point_with_active_constraint(ratio):
    # g close to b: the TRPO step would violate the constraint, so that the dual solution is needed
    base = Problem.random(seed=7, n=4, c_over_boundary=ratio)
    problem = Problem(base.h, base.b + 0.05 * base.g, base.b, base.c, base.delta)
    assert problem.c + problem.b @ trpo_step(problem) > 0
    x, info = problem.solve()
    assert info.case == 2 and info.nu > 0
    problem.check_optimal(x, info)


def test_reward_gradient_parallel_to_cost_gradient():
    # g = 2 b: every point on the constraint boundary inside the trust region is optimal; the step is the one of
    # least H-norm, x = -(c / s) H^-1 b.
    base = Problem.random(seed=4, n=3, c_over_boundary=0.5)
    problem = Problem(base.h, 2.0 * base.b, base.b, base.c, base.delta)
    x, info = problem.solve()
    assert info.case == 1
    np.testing.assert_allclose(x, -(problem.c / problem.s) * problem.hinv_b, rtol=1e-9)
    assert problem.c + problem.b @ x == pytest.approx(0.0, abs=1e-12)
    assert problem.g @ x == pytest.approx(problem.g @ problem.reference(), rel=1e-6)


def test_zero_reward_gradient():
    base = Problem.random(seed=5, n=3, c_over_boundary=0.5)
    problem = Problem(base.h, np.zeros(3), base.b, base.c, base.delta)
    x, info = problem.solve()
    assert np.all(np.isfinite(x)) and problem.c + problem.b @ x <= 1e-12
    problem = Problem(base.h, np.zeros(3), base.b, -base.c, base.delta)
    x, info = problem.solve()
    np.testing.assert_array_equal(x, np.zeros(3))


def test_cpo_step_rejects_non_positive_delta():
    with pytest.raises(ValueError, match="delta"):
        cpo_step(t(1.0), t(1.0), 0.0, t(1.0), t(1.0), 0.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 10), st.integers(0, 2**32 - 1), st.floats(-2.0, 2.0), st.sampled_from([1e-3, 0.01, 0.5]))
def test_cpo_step_matches_slsqp(n, seed, ratio, delta):
    assume(abs(abs(ratio) - 1.0) > 1e-3)  # away from the tangent case, where SLSQP is ill-conditioned
    assume(ratio == 0.0 or abs(ratio) > 1e-12)  # a subnormal ratio makes c round to zero: its sign, the case, is lost
    problem = Problem.random(seed=seed, n=n, c_over_boundary=ratio, delta=delta)
    x, info = problem.solve()
    if ratio >= 1.0:
        assert info.case == 0 and problem.b @ x < 0
        assert problem.kl(x) == pytest.approx(delta, rel=1e-9)
    elif ratio <= -1.0:
        assert info.case == 3
        np.testing.assert_allclose(x, trpo_step(problem), rtol=1e-9)
    else:
        assert info.case == (1 if ratio >= 0 else 2)
        problem.check_optimal(x, info)


def test_conjugate_gradient_then_cpo_step():
    """The intended pipeline: H^-1 g and H^-1 b from conjugate gradient on H v products."""
    problem = Problem.random(seed=6, n=8, c_over_boundary=0.4)
    h = torch.from_numpy(problem.h)
    g, b = torch.from_numpy(problem.g), torch.from_numpy(problem.b)
    hinv_g = conjugate_gradient(lambda v: h @ v, g, iters=8, residual_tol=0.0)
    hinv_b = conjugate_gradient(lambda v: h @ v, b, iters=8, residual_tol=0.0)
    x, info = cpo_step(g, b, problem.c, hinv_g, hinv_b, problem.delta)
    problem.check_optimal(x.numpy(), info)


# ----------------------------------------------------------------------------------- flat parameter helpers


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))


def test_flat_params_round_trip():
    net = _net()
    flat = get_flat_params(net.parameters())
    assert flat.shape == (3 * 4 + 4 + 4 * 2 + 2,)
    new = torch.arange(flat.numel(), dtype=flat.dtype)
    set_flat_params(net.parameters(), new)
    assert torch.equal(get_flat_params(net.parameters()), new)
    assert torch.equal(net[0].weight.detach(), new[:12].view(4, 3))
    assert net[0].weight.requires_grad
    with pytest.raises(ValueError, match="26 elements"):
        set_flat_params(net.parameters(), new[:-1])


def test_flat_grad_matches_autograd_and_fills_zeros():
    net = _net()
    unused = torch.nn.Parameter(torch.ones(2))
    frozen = torch.ones(3)  # does not require grad
    params = [*net.parameters(), unused, frozen]
    loss = net(torch.ones(5, 3)).pow(2).sum()
    grad = flat_grad(loss, params, retain_graph=True)
    loss.backward()
    expected = torch.cat([p.grad.reshape(-1) for p in net.parameters()] + [torch.zeros(5)])
    assert torch.allclose(grad, expected)
    from_grads = flat_grad([p.grad for p in net.parameters()] + [None, None], params)
    assert torch.equal(from_grads, expected)
    with pytest.raises(ValueError, match="2 gradients for 3"):
        flat_grad([None, None], [unused, unused, unused])


def test_flat_grad_create_graph_gives_hessian_vector_products():
    w = torch.nn.Parameter(t(1.0, 2.0))
    loss = w[0] ** 2 * w[1] + w[1] ** 3  # Hessian [[2 w1, 2 w0], [2 w0, 6 w1]] = [[4, 2], [2, 12]]
    grad = flat_grad(loss, [w], create_graph=True)
    hvp = flat_grad(torch.dot(grad, t(1.0, -1.0)), [w])
    assert_close(hvp, [2.0, -10.0])


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([np.float32, np.float64]),
    st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=0, max_size=300),
)
def test_norm_is_numpys_norm_bit_for_bit(dtype, values):
    """The bisector's `norm` skips `np.linalg.norm`'s wrapper, not its arithmetic: the same value and dtype."""
    for v in (np.asarray(values, dtype), np.asarray(values, dtype)[::2]):  # contiguous, and strided (copied first)
        assert norm(v).dtype == np.linalg.norm(v).dtype
        assert norm(v).tobytes() == np.linalg.norm(v).tobytes()
