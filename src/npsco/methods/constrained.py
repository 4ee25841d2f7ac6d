"""Update-direction maths for the constrained methods
(TNB/CTNB bisector, conjugate gradient, CPO's analytic dual solution).

All functions take and return 1-D torch tensors (flattened parameter vectors), plus two helpers to move between a
module's parameters and such flat vectors; the bisector is defined on numpy arrays (`bisector_np`, which TNB's numpy
update calls directly) and `bisector` runs it on torch tensors, so both updates share one definition of the rules.
"""

import math
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

TNB_RULES = ("authors", "paper_eq5", "safe")
"""TNB/CTNB's bisector rules (`bisector_np`); the `tnb_rule` setting also accepts `paper`, the name of `paper_eq5` in
runs made before the rule was renamed."""


def norm(v: np.ndarray) -> np.floating:
    """``|v|`` of a 1-D float vector: `np.linalg.norm(v)`'s own arithmetic (sqrt of ``v . v`` over a contiguous copy
    of a strided ``v``), minus its wrapper."""
    v = v.ravel(order="K")
    return np.sqrt(v.dot(v))


def _unit(v: np.ndarray, min_norm: float = 0.0, v_norm: np.floating | None = None) -> np.ndarray:
    """``v / |v|``, or the zero vector when ``|v| <= min_norm`` (so that zero vectors never give NaN); `v_norm`:
    ``|v|`` if already known."""
    v_norm = norm(v) if v_norm is None else v_norm
    return v / v_norm if v_norm > min_norm else np.zeros_like(v)


def bisector_np(g_task: np.ndarray, g_novelty: np.ndarray, rule: str = "authors") -> np.ndarray:
    """TNB/CTNB update direction from the task gradient ``f`` and the novelty gradient ``g`` (paper Eq. 5), in their
    dtype.

    Notation: ``f^ = f / |f|``, ``g^ = g / |g|``, ``cos = f^ . g^``, ``f_perp = f - (f . g^) g^`` (the task gradient
    without its component along ``g``); both gradients are ascent directions. ``authors`` and ``safe`` use the paper's
    fixed learning stride ``L = (|f| + |g|) / 2``; all three rules agree on the direction when ``cos > 0``.

    ``rule="authors"`` (default), the rule of the authors' code:

    - ``cos > 0``:  ``p = L * unit(f^ + g^)``, the bisector of the two gradients;
    - ``cos <= 0``: ``p = L * unit(f_perp)``, the task gradient made orthogonal to the novelty gradient: never against
      the task (``p . f = L |f| sin a >= 0``, ``a`` the angle between ``f`` and ``g``) and neutral for novelty to first
      order (``p . g = 0``).

    ``rule="paper_eq5"`` (also ``"paper"``), Eq. 5 as printed, without rescaling to ``L``:

    - ``cos > 0``:  ``p = f + (|f| / |g|) g``;
    - ``cos <= 0``: ``p = f + (|f| / |g|) cos g = f + (f . g^) g^``, which doubles the task gradient's component along
      ``g`` where the authors' rule removes it: ``p . g = 2 f . g <= 0``, a step against novelty.

    ``rule="safe"``:

    - ``cos > 0``:  as ``authors``;
    - ``cos <= 0``: ``p = L * unit(unit(f_perp) + g^)``, ``f_perp`` bisected with ``g^``: never against novelty
      (``p . g = L |g| / sqrt(2) > 0``), but ``p . f = L |f| (sin a + cos a) / sqrt(2)`` is negative past 135 degrees
      (task progress traded for novelty). Its two cases agree at ``cos = 0``.

    Zero gradients: a zero vector's unit vector is taken as zero (then ``cos = 0``). ``authors`` and ``safe`` give
    ``f / 2`` when ``g = 0``, ``g / 2`` when ``f = 0`` and zero when both are; ``paper_eq5`` gives ``f`` when ``g = 0``.
    When ``f`` and ``g`` are (numerically) antiparallel, ``f_perp`` is taken as zero: ``authors`` gives ``p = 0`` (no
    direction helps the task without lowering novelty), ``safe`` gives ``L g^``.
    """
    if g_task.shape != g_novelty.shape or g_task.ndim != 1:
        raise ValueError(f"expected two 1-D vectors of the same shape, got {g_task.shape} and {g_novelty.shape}")
    rule = "paper_eq5" if rule == "paper" else rule
    if rule not in TNB_RULES:
        raise ValueError(f"unknown rule {rule!r}; expected one of {', '.join(TNB_RULES)}")
    f_norm, g_norm = norm(g_task), norm(g_novelty)
    f_hat, g_hat = _unit(g_task, v_norm=f_norm), _unit(g_novelty, v_norm=g_norm)
    cos = np.dot(f_hat, g_hat)
    if rule == "paper_eq5":
        if g_norm == 0:
            return g_task.copy()
        novelty_weight = f_norm / g_norm if cos > 0 else f_norm / g_norm * cos
        return g_task + novelty_weight * g_novelty
    if cos > 0 or f_norm == 0:
        direction = f_hat + g_hat
    else:
        f_perp = g_task - np.dot(g_task, g_hat) * g_hat
        relative_tol = math.sqrt(np.finfo(g_task.dtype).eps)  # shorter: f and g antiparallel up to round-off
        f_perp_hat = _unit(f_perp, min_norm=relative_tol * float(f_norm))
        direction = f_perp_hat if rule == "authors" else f_perp_hat + g_hat
    return 0.5 * (f_norm + g_norm) * _unit(direction)


def bisector(g_task: Tensor, g_novelty: Tensor, rule: str = "authors") -> Tensor:
    """`bisector_np` on 1-D torch tensors (computed in numpy, returned in the inputs' dtype)."""
    return torch.from_numpy(bisector_np(g_task.detach().numpy(), g_novelty.detach().numpy(), rule))


def conjugate_gradient(
    Avp: Callable[[Tensor], Tensor], b: Tensor, iters: int = 10, residual_tol: float = 1e-10
) -> Tensor:
    """Solve ``A x = b`` for a symmetric positive-definite ``A`` known only through ``Avp(v) = A v``.

    Plain conjugate gradient from ``x = 0``: at most ``iters`` products ``A v``; stops early once the squared residual
    ``|b - A x|^2`` is ``<= residual_tol``. Exact (up to round-off) after ``n`` iterations on an ``n``-dim problem.
    ValueError if ``A`` is found not positive definite along a search direction.
    """
    x = torch.zeros_like(b)
    residual = b.clone()
    direction = b.clone()
    residual_sq = torch.dot(residual, residual)
    for _ in range(iters):
        if residual_sq <= residual_tol:
            break
        a_direction = Avp(direction)
        curvature = torch.dot(direction, a_direction)
        if curvature <= 0:
            raise ValueError("Avp is not positive definite along the conjugate-gradient direction")
        alpha = residual_sq / curvature
        x = x + alpha * direction
        residual = residual - alpha * a_direction
        new_residual_sq = torch.dot(residual, residual)
        direction = residual + (new_residual_sq / residual_sq) * direction
        residual_sq = new_residual_sq
    return x


class CPOStepInfo(NamedTuple):
    """What ``cpo_step`` did, for logging.

    ``case``: 0 infeasible, recovery step; 1 current point infeasible (``c >= 0``) but the trust region holds feasible
    points, dual solution; 2 current point feasible (``c < 0``), part of the trust region infeasible, dual solution;
    3 whole trust region feasible, TRPO step; 4 no cost gradient (``b ~ 0``), TRPO step.
    ``lam``, ``nu``: the dual variables of the KL and cost constraints (``x = (H^-1 g - nu H^-1 b) / lam``); in case 0
    ``lam = 0`` and ``nu`` is the recovery step size (``x = -nu H^-1 b``).
    """

    case: int
    lam: float
    nu: float


def _trpo_step(Hinv_g: Tensor, q: float, delta: float, case: int) -> tuple[Tensor, CPOStepInfo]:
    """``x = sqrt(2 delta / q) H^-1 g`` (zero when ``q = 0``), the unconstrained trust-region step."""
    if q <= 0:
        return torch.zeros_like(Hinv_g), CPOStepInfo(case, 0.0, 0.0)
    lam = math.sqrt(q / (2.0 * delta))
    return Hinv_g / lam, CPOStepInfo(case, lam, 0.0)


def _clip(value: float, interval: tuple[float, float]) -> float:
    return min(max(value, interval[0]), interval[1])


def _over(numerator: float, lam: float) -> float:
    """``numerator / lam`` with ``0 / 0 = 0`` (a zero numerator makes the term vanish for every lam)."""
    return 0.0 if numerator == 0 else (numerator / lam if lam > 0 else math.inf)


def cpo_step(
    g: Tensor, b: Tensor, c: float, Hinv_g: Tensor, Hinv_b: Tensor, delta: float, eps: float = 1e-8
) -> tuple[Tensor, CPOStepInfo]:
    """Analytic solution of CPO's trust-region subproblem (Achiam et al. 2017, App. 10.2).

    Solves  ``max_x g . x  s.t.  0.5 x^T H x <= delta  and  c + b . x <= 0``, where ``g`` is the reward-surrogate
    gradient, ``b`` the cost-surrogate gradient and ``c = J_C - d`` the current constraint value, given
    ``Hinv_g = H^-1 g`` and ``Hinv_b = H^-1 b`` (from ``conjugate_gradient``). With ``q = g^T H^-1 g``,
    ``r = g^T H^-1 b``, ``s = b^T H^-1 b``, ``A = q - r^2 / s >= 0`` and ``B = 2 delta - c^2 / s``:

    - ``|b|^2 <= eps``: the linearised cost does not depend on ``x``; TRPO step (case 4, whatever ``c``).
    - ``B <= 0`` and ``c < 0``: the whole trust region is feasible; TRPO step ``sqrt(2 delta / q) H^-1 g`` (case 3).
    - ``B <= 0`` and ``c >= 0``: no feasible point (or only the tangent point); recovery step
      ``x = -sqrt(2 delta / s) H^-1 b``, which minimises ``b . x`` on the trust region (case 0).
    - otherwise (cases 1, 2) the dual problem ``min_{lam > 0, nu >= 0} (q - 2 nu r + nu^2 s) / (2 lam) + lam delta
      - nu c`` is solved: ``nu = max(0, (lam c + r) / s)``, which splits ``lam > 0`` into
      ``Lambda_a = {lam c + r > 0}`` (``nu > 0``, dual ``A / (2 lam) + lam B / 2 - c r / s``, minimiser
      ``sqrt(A / B)``) and ``Lambda_b = {lam c + r <= 0}`` (``nu = 0``, dual ``q / (2 lam) + lam delta``, minimiser
      ``sqrt(q / (2 delta))``). Each minimiser is clipped to its interval (the duals are convex in ``lam``); the one
      with the lower dual value wins. Then ``x = (H^-1 g - nu H^-1 b) / lam``, computed for ``nu > 0`` as
      ``x = (H^-1 g - (r / s) H^-1 b) / lam - (c / s) H^-1 b``: the second term puts the linearised cost on its
      boundary, the first (H-orthogonal to ``b``) spends the KL budget on the reward; it is dropped when ``A ~ 0``
      (``g`` parallel to ``b``), where the bound ``lam`` may be 0.

    Returns the step ``x`` and a ``CPOStepInfo`` (case, lam, nu).
    """
    if delta <= 0:
        raise ValueError(f"delta must be positive, got {delta}")
    c = float(c)
    q = float(torch.dot(g, Hinv_g))
    s = float(torch.dot(b, Hinv_b))
    if float(torch.dot(b, b)) <= eps or s <= 0:
        return _trpo_step(Hinv_g, q, delta, case=4)
    r = float(torch.dot(g, Hinv_b))
    B = 2.0 * delta - c * c / s
    if B <= 0:
        if c < 0:
            return _trpo_step(Hinv_g, q, delta, case=3)
        nu = math.sqrt(2.0 * delta / s)
        return -nu * Hinv_b, CPOStepInfo(0, 0.0, nu)

    case = 1 if c >= 0 else 2
    A = q - r * r / s
    if A <= 1e-10 * q:
        A = 0.0
    # Lambda_a = {lam >= 0: lam c + r > 0} and Lambda_b = {lam >= 0: lam c + r <= 0} as closed intervals, or None.
    lambda_a: tuple[float, float] | None
    lambda_b: tuple[float, float] | None
    if c > 0:
        lambda_a = (max(0.0, -r / c), math.inf)
        lambda_b = (0.0, -r / c) if r < 0 else None
    elif c < 0:
        lambda_a = (0.0, -r / c) if r > 0 else None
        lambda_b = (max(0.0, -r / c), math.inf)
    else:
        lambda_a, lambda_b = ((0.0, math.inf), None) if r > 0 else (None, (0.0, math.inf))

    best_dual, lam, nu_positive = math.inf, 0.0, False
    if lambda_a is not None:
        lam_a = _clip(math.sqrt(A / B), lambda_a)
        dual_a = _over(A, 2.0 * lam_a) + lam_a * B / 2.0 - c * r / s
        best_dual, lam, nu_positive = dual_a, lam_a, True
    if lambda_b is not None:
        lam_b = _clip(math.sqrt(q / (2.0 * delta)), lambda_b)
        dual_b = _over(q, 2.0 * lam_b) + lam_b * delta
        if dual_b < best_dual:
            lam, nu_positive = lam_b, False

    if not nu_positive:
        step = Hinv_g / lam if lam > 0 else torch.zeros_like(Hinv_g)
        return step, CPOStepInfo(case, lam, 0.0)
    nu = (lam * c + r) / s
    step = -(c / s) * Hinv_b
    if A > 0:
        step = step + (Hinv_g - (r / s) * Hinv_b) / lam
    return step, CPOStepInfo(case, lam, nu)


def flat_grad(
    loss_or_grads: Tensor | Sequence[Tensor | None],
    params: Iterable[Tensor],
    retain_graph: bool = False,
    create_graph: bool = False,
) -> Tensor:
    """Gradient of a scalar loss w.r.t. ``params`` (or already computed per-parameter gradients), as one 1-D tensor.

    Parameters that do not require grad, or that the loss does not depend on, contribute zeros. ``create_graph=True``
    keeps the graph of the gradient itself (for Hessian- or Fisher-vector products) and implies ``retain_graph``.
    """
    params = list(params)
    if isinstance(loss_or_grads, Tensor):
        trainable = [p for p in params if p.requires_grad]
        computed = iter(
            torch.autograd.grad(
                loss_or_grads,
                trainable,
                retain_graph=retain_graph or create_graph,
                create_graph=create_graph,
                allow_unused=True,
            )
        )
        grads = [next(computed) if p.requires_grad else None for p in params]
    else:
        grads = list(loss_or_grads)
        if len(grads) != len(params):
            raise ValueError(f"{len(grads)} gradients for {len(params)} parameters")
    return torch.cat(
        [(torch.zeros_like(p) if gr is None else gr).reshape(-1) for gr, p in zip(grads, params, strict=True)]
    )


def get_flat_params(params: Iterable[Tensor]) -> Tensor:
    """All parameters concatenated into one detached 1-D tensor (in iteration order)."""
    return torch.cat([p.detach().reshape(-1) for p in params])


def set_flat_params(params: Iterable[Tensor], flat: Tensor) -> None:
    """Copy a 1-D tensor laid out as ``get_flat_params`` into the parameters, in place (no autograd)."""
    params = list(params)
    total = sum(p.numel() for p in params)
    if flat.dim() != 1 or flat.numel() != total:
        raise ValueError(f"expected a 1-D tensor of {total} elements, got shape {tuple(flat.shape)}")
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
