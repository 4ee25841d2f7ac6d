"""A set of M frozen reference policies evaluated in ONE batched call per step, and the per-episode novelty tracker.

`ReferenceSet` stacks the references' weights (one group per architecture; a population trained with one preset is one
group) and their observation normalisers, so the M mean actions at N states cost a few batched matmuls whatever M is.
`NoveltyTracker` keeps, per environment and per reference, the running mean of the per-state distance since the start
of the episode: the quantity IPD constrains, WSR/TNB reward and CPO costs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from npsco.errors import NpscoError
from npsco.novelty import _kernels
from npsco.novelty.metrics import ACTION_METRICS, deterministic_distance, wasserstein2_distance
from npsco.policy import OBS_NORM_EPS, Policy


class _Group:
    """References sharing one architecture, with stacked parameters (leading axis = reference).

    The forward pass works on transposed activations, (M, units, N): every layer is then one stacked matmul of
    contiguous arrays, `W (M, out, in) @ x (M, in, N)`, and each bias is the last column of its layer's weights,
    multiplied by a constant row of ones under the activations (a buffer per N, reused: no separate bias additions).
    When no reference would clip the observations (the common case), each reference's normaliser is folded into its
    first layer and the M first layers are stacked into one (M * H1, obs_dim + 1) matrix: one GEMM for all references.
    The same GEMM also returns, in extra rows, each observation dimension's position in the box [box_lo, box_hi] of
    observations no reference clips (scaled to [-1, 1]), so that checking the fast path costs two small calls.
    Otherwise the exact per-reference normalise-and-clip runs. The hidden layers' activation (tanh, or ReLU) and the
    output (linear, or tanh-squashed into the bounds: SAC, TD3) are the references' own (`Policy.raw_mean`).
    """

    def __init__(self, policies: Sequence[Policy]):
        self.relu, self.squash = policies[0].activation == "relu", policies[0].output == "tanh"  # one architecture
        # per layer: weights (M, out, in) and biases (M, out, 1)
        weights = [
            (np.stack([p.weights[i][0] for p in policies]), np.stack([p.weights[i][1] for p in policies])[..., None])
            for i in range(len(policies[0].weights))
        ]
        self.w1, self.b1 = weights[0]  # the first layer as it is, for observations that some reference clips
        obs_mean = np.stack([p.obs_mean if p.norm_obs else np.zeros_like(p.obs_mean) for p in policies]).astype(
            np.float64
        )
        obs_scale = np.stack(
            [1.0 / np.sqrt(p.obs_var + OBS_NORM_EPS) if p.norm_obs else np.ones_like(p.obs_var) for p in policies]
        ).astype(np.float64)
        obs_clip = np.array([p.obs_clip if p.norm_obs else np.inf for p in policies])[:, None]
        self.obs_clip = obs_clip.astype(np.float32)[..., None]
        self.low = np.stack([p.action_low for p in policies])[..., None]
        self.high = np.stack([p.action_high for p in policies])[..., None]
        self.span = self.high - self.low  # a tanh output's range, as `npsco.policy.squash` computes it
        m, h, d = self.w1.shape
        self.units = m * h
        # observations inside [lo, hi] are clipped by no reference
        with np.errstate(over="ignore"):
            lo, hi = (obs_mean - obs_clip / obs_scale).max(0), (obs_mean + obs_clip / obs_scale).min(0)
        self.box_lo, self.box_hi = lo.astype(np.float32), hi.astype(np.float32)
        self.box_empty = bool((lo > hi).any())  # references too far apart: every observation takes the exact path
        # folded first layer: W1 (x - mu) * s = W1 s (x - c) - W1 s (mu - c), with c the references' mean normaliser
        # centre, so that the float32 sum does not cancel large terms when a normaliser has a large mean
        self.centre = obs_mean.mean(0).astype(np.float32)
        centre = self.centre.astype(np.float64)
        w1s = self.w1.astype(np.float64) * obs_scale[:, None, :]
        shift = np.einsum("mhd,md->mh", w1s, obs_mean - centre)[..., None]
        rows = [np.concatenate([w1s.reshape(m * h, d), (self.b1 - shift).reshape(m * h, 1)], 1)]
        # box rows: (x_k - mid_k) / half_k for each dimension k the box bounds (|row| <= 1 inside the box)
        bounded = np.flatnonzero(np.isfinite(lo) & np.isfinite(hi)) if not self.box_empty else np.zeros(0, int)
        mid, half = (lo[bounded] + hi[bounded]) / 2, (hi[bounded] - lo[bounded]) / 2
        box = np.zeros((bounded.size, d + 1))
        box[np.arange(bounded.size), bounded] = 1.0 / half
        box[:, -1] = (centre[bounded] - mid) / half
        self.w1_stacked = np.concatenate(rows + [box], 0).astype(np.float32)
        # the later layers with their bias as an extra input column: W' = [W | b], applied to [x; 1]
        self.hidden = [np.concatenate([w, b], axis=2) for w, b in weights[1:]]
        self._buffers: tuple[int, np.ndarray, list[np.ndarray], np.ndarray] | None = None
        self.obs_mean = obs_mean.astype(np.float32)[..., None]
        self.obs_scale = obs_scale.astype(np.float32)[..., None]

    def _inputs(self, n: int) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """For N states: the (obs_dim + 1, N) input of the stacked first layer and the (M, in + 1, N) input of each
        later layer, each with its last row set to ones once; and a scratch array for the box rows."""
        if self._buffers is None or self._buffers[0] != n:  # kept for one N at a time (the rollout's)
            self._buffers = (
                n,
                np.ones((self.w1_stacked.shape[1], n), np.float32),
                [np.ones((w.shape[0], w.shape[2], n), np.float32) for w in self.hidden],
                np.empty((self.w1_stacked.shape[0] - self.units, n), np.float32),
            )
        return self._buffers[1], self._buffers[2], self._buffers[3]

    def mean_actions_t(self, obs: np.ndarray) -> np.ndarray:
        """(M, A, N) clipped mean actions at raw observations `obs` (N, obs_dim); a fresh array.

        This runs at every step of an IPD rollout, where every numpy call counts (cold caches after the simulator's
        step): few calls, in-place ufuncs, no np.clip wrapper, no bias additions, and the hidden layers' tanh compiled
        (`_kernels.tanh_rows`; the timings: benchmarks/results/throughput/design_measurements.md)."""
        m, n = len(self.w1), obs.shape[0]
        first, later, box = self._inputs(n)
        np.subtract(obs.T, self.centre[:, None], out=first[:-1])
        y = self.w1_stacked @ first
        if not self.box_empty and (
            box.size == 0 or np.maximum.reduce(np.abs(y[self.units :], out=box), axis=None) <= 1.0
        ):
            x = y[: self.units].reshape(m, -1, n)
        else:
            xt = obs.T[None] - self.obs_mean
            xt *= self.obs_scale
            np.minimum(np.maximum(xt, -self.obs_clip, out=xt), self.obs_clip, out=xt)
            x = np.matmul(self.w1, xt)
            x += self.b1
        for w, buf in zip(self.hidden, later, strict=True):
            if self.relu:
                np.maximum(x, 0, out=buf[:, :-1])
            else:
                _kernels.tanh_rows(x.reshape(m, -1), buf.reshape(m, -1))  # buf[:, :-1] = tanh(x); last row stays ones
            x = np.matmul(w, buf)
        if self.squash:  # low + (tanh(x) + 1) / 2 (high - low), in `squash`'s order of operations
            np.tanh(x, out=x)
            x += 1.0
            x *= 0.5
            x *= self.span
            x += self.low
        np.minimum(np.maximum(x, self.low, out=x), self.high, out=x)
        return x


class _CompiledStep:
    """`NoveltyTracker.update` for one group of references in one compiled call (`_kernels.novelty_step`): the
    forward pass of every reference at the step's few states, the distances, the running sums and their minimum.

    At a rollout's step numpy's per-call overhead, not arithmetic, is most of `mean_actions_t`'s time; this call has
    none of it. It computes what the numpy path computes, to float32 rounding: the first layer applies each
    reference's own normaliser and clip (the exact path), each layer sums in its own order (BLAS has its own). Each
    layer is stored for its loop: by rows (one dot product per output) when it has no more outputs than inputs, else
    by columns (each input's column added to every output).
    """

    def __init__(self, group: _Group, std: np.ndarray):
        m, d = group.obs_mean.shape[:2]
        clip = np.broadcast_to(group.obs_clip[..., 0], (m, d))
        self.norm = np.ascontiguousarray(np.stack([group.obs_mean[..., 0], group.obs_scale[..., 0], clip], 1))
        self.bounds = np.stack([group.low[..., 0], group.high[..., 0], std], 1).astype(np.float32)
        layers = [np.concatenate([group.w1, group.b1], axis=2), *group.hidden]  # each (M, out, in + 1)
        self.rows = np.array([w.shape[1] <= w.shape[2] for w in layers])
        self.weights = tuple(
            np.ascontiguousarray(w if by_rows else w.transpose(0, 2, 1), np.float32)
            for w, by_rows in zip(layers, self.rows, strict=True)
        )
        self.relu, self.squash = group.relu, group.squash
        self.work = sum(w.size for w in layers)
        """Multiply-adds of the M references' forward passes at one state."""
        self._no_std = np.zeros(0, np.float32)

    def __call__(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        std: np.ndarray | None,
        discount: float,
        sums: np.ndarray,
        counts: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(d (N, M), u (N,)) as `NoveltyTracker.update` returns them; `sums` (M, N) and `counts` (N,) updated in
        place. `std`: the new policy's (A,) for the wasserstein2 metric, None for the deterministic one."""
        n = len(obs)
        d, u = np.empty((n, len(self.norm)), np.float32), np.empty(n)
        _kernels.novelty_step(
            np.ascontiguousarray(obs, np.float32),
            np.ascontiguousarray(action, np.float32),
            self._no_std if std is None else np.ascontiguousarray(std, np.float32),
            self.norm,
            self.bounds,
            self.weights,
            self.rows,
            self.relu,
            self.squash,
            discount,
            sums,
            counts,
            d,
            u,
        )
        return d, u


class ReferenceSet:
    """M frozen policies; `mean_actions(obs)` returns their executed deterministic actions, shape (M, N, A).

    `exact=True` is for measuring (evaluation, a candidate's verdict, the report): each reference acts through its own
    `Policy.mean_action`, row by row, and the distances are summed in float64 in a fixed order, so that a state's
    distance is the same whatever other states the call holds. The default, batched path is for a rollout's steps (the
    training signal), where speed counts and float32 rounding does not."""

    def __init__(self, policies: Sequence[Policy], names: Sequence[str] | None = None, exact: bool = False):
        self.policies = list(policies)
        self.exact = exact
        self.names = list(names) if names is not None else [f"ref{i}" for i in range(len(self.policies))]
        if len(self.names) != len(self.policies):
            raise ValueError("one name per reference policy")
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, p in enumerate(self.policies):
            groups[(tuple(w.shape for w, _ in p.weights), p.activation, p.output)].append(i)
        self._groups = [(np.array(idx), _Group([self.policies[i] for i in idx])) for key, idx in groups.items()]
        self.std = np.stack([p.action_std for p in self.policies]) if self.policies else None

    def __len__(self) -> int:
        return len(self.policies)

    def check_compatible(
        self, observation_space: gym.spaces.Box, action_space: gym.spaces.Box, env_id: str = "the environment"
    ) -> None:
        """Refuse references whose observation or action space differs from the environment's, naming both."""
        for name, p in zip(self.names, self.policies, strict=True):
            for what, mine, theirs in (
                ("observation", p.observation_space, observation_space),
                ("action", p.action_space, action_space),
            ):
                same = (
                    mine.shape == theirs.shape
                    and np.allclose(mine.low, theirs.low)
                    and np.allclose(mine.high, theirs.high)
                )
                if not same:
                    raise NpscoError(
                        f"reference {name} ({p.metadata.get('env_id', '?')}) has {what} space {_describe(mine)} but "
                        f"{env_id} has {_describe(theirs)}"
                    )

    def mean_actions(self, obs: np.ndarray) -> np.ndarray:
        """(M, N, A) clipped mean actions of every reference at raw observations `obs` (N, obs_dim)."""
        if self.exact:
            return np.stack([p.mean_action(obs) for p in self.policies])
        return self._mean_actions_t(np.asarray(obs, np.float32)).transpose(0, 2, 1)

    def _mean_actions_t(self, obs: np.ndarray) -> np.ndarray:
        """(M, A, N): the same, transposed (a fresh array)."""
        if len(self._groups) == 1:
            return self._groups[0][1].mean_actions_t(obs)
        out = np.empty((len(self.policies), self.policies[0].action_dim, obs.shape[0]), np.float32)
        for idx, group in self._groups:
            out[idx] = group.mean_actions_t(obs)
        return out

    def distances(
        self, obs: np.ndarray, action: np.ndarray, std: np.ndarray | None = None, metric: str = "deterministic"
    ) -> np.ndarray:
        """Per-state distance (N, M) between `action` (N, A) of the new policy and each reference's at `obs`.

        `deterministic`: ||a - mu_j(s)||_2 (paper App. C). `wasserstein2`: sqrt(||a - mu_j||^2 + ||std - std_j||^2),
        the closed-form W2 between diagonal Gaussians (paper Sec. 3.1); needs the new policy's `std` (A,).
        The result is the transpose of a C-contiguous (M, N) float32 array; with `exact`, (N, M) float64.
        """
        _check_metric(metric, std)
        if self.exact:
            return self._exact_distances(self.mean_actions(obs), action, std, metric)
        return self._distances(self._mean_actions_t(np.asarray(obs, np.float32)), action, std, metric)

    def actions_and_distances(
        self, obs: np.ndarray, action: np.ndarray, std: np.ndarray | None = None, metric: str = "deterministic"
    ) -> tuple[np.ndarray, np.ndarray]:
        """The references' mean actions (M, N, A) at `obs` and `distances(obs, action, std, metric)`, from one
        forward pass of the references."""
        _check_metric(metric, std)
        if self.exact:
            actions = self.mean_actions(obs)
            return actions, self._exact_distances(actions, action, std, metric)
        actions_t = self._mean_actions_t(np.asarray(obs, np.float32))
        return actions_t.transpose(0, 2, 1), self._distances(actions_t.copy(), action, std, metric)

    def _exact_distances(
        self, theirs: np.ndarray, action: np.ndarray, std: np.ndarray | None, metric: str
    ) -> np.ndarray:
        """`distances` with `exact`, from the references' (M, N, A) mean actions: (N, M) float64, summed in order."""
        theirs, mine = theirs.transpose(1, 0, 2), np.asarray(action)[:, None, :]
        if metric == "wasserstein2":
            assert self.std is not None and std is not None  # (at least one reference; checked by _check_metric)
            return wasserstein2_distance(theirs, self.std[None], mine, np.asarray(std)[None, None])
        return deterministic_distance(theirs, mine)

    def _distances(self, diff: np.ndarray, action: np.ndarray, std: np.ndarray | None, metric: str) -> np.ndarray:
        """`distances` from the references' (M, A, N) mean actions `diff`, a fresh array it works in."""
        diff -= np.asarray(action).T
        sq = np.vecdot(diff, diff, axis=1)  # type: ignore[call-overload]  # (M, N); numpy's stubs lack gufunc `axis`
        if metric == "wasserstein2":
            assert std is not None  # checked by _check_metric
            sq += ((self.std - std[None]) ** 2).sum(-1)[:, None]
        return np.sqrt(sq, out=sq).T


def _check_metric(metric: str, std: np.ndarray | None) -> None:
    if metric == "wasserstein2" and std is None:
        raise ValueError("the wasserstein2 metric needs the new policy's std")
    if metric not in ACTION_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {ACTION_METRICS}")


def _describe(space: gym.spaces.Box) -> str:
    low, high = np.unique(space.low), np.unique(space.high)
    bounds = f"[{low[0]:g}, {high[0]:g}]" if low.size == 1 and high.size == 1 else "(varied bounds)"
    return f"Box{tuple(space.shape)} {bounds}"


COMPILED_STEP_WORK = 500_000
"""`NoveltyTracker.update` runs compiled (`_CompiledStep`) when the references' forward passes at the N states of a
step take at most this many multiply-adds, and with numpy (BLAS) beyond: about where numpy's matmuls start to win
(benchmarks/results/throughput/design_measurements.md)."""


class NoveltyTracker:
    """Per env and per reference, the running mean of the per-state distance over the current episode.

    `update(obs, action)` folds in one step and returns `(d, u)`: `d` (N, M) the per-state distances at this step and
    `u` (N,) the running novelty min_j mean_{t' <= t} d_j(s_t'), the quantity of the paper's Algorithm 1. With a
    `discount` g < 1 the mean is weighted by g^(t - t'): the past fades (`npsco.novelty.metrics.running_novelty`).

    A step of a few envs against references of one architecture runs compiled, in one call (`_CompiledStep`, up to
    `COMPILED_STEP_WORK`), unless `compiled` is False; otherwise, and with `keep_actions`, through
    `ReferenceSet.distances`. Both give the same numbers to float32 rounding.
    """

    def __init__(
        self,
        references: ReferenceSet,
        num_envs: int,
        metric: str = "deterministic",
        discount: float = 1.0,
        keep_actions: bool = False,
        compiled: bool = True,
    ):
        if len(references) == 0:
            raise NpscoError("novelty needs at least one reference policy")
        if metric not in ACTION_METRICS:
            raise NpscoError(f"unknown novelty metric {metric!r}; choose one of {', '.join(ACTION_METRICS)}")
        if not 0 < discount <= 1:
            raise NpscoError(f"the novelty discount must be in (0, 1], got {discount!r}")
        self.references, self.metric, self.discount = references, metric, float(discount)
        self.keep_actions = keep_actions
        self.reference_actions: np.ndarray | None = None
        """With `keep_actions`: the references' (M, N, A) mean actions at the last step's observations."""
        self._sums = np.zeros((len(references), num_envs))  # (M, N): what distances() computes, without a transpose
        self.counts = np.zeros(num_envs)
        self._compiled_step: _CompiledStep | None = None
        if compiled and len(references._groups) == 1 and not keep_actions:  # one architecture, distances only
            assert references.std is not None  # (at least one reference)
            step = _CompiledStep(references._groups[0][1], references.std)
            self._compiled_step = step if num_envs * step.work <= COMPILED_STEP_WORK else None

    @property
    def sums(self) -> np.ndarray:
        """(N, M): per env and reference, the sum of the per-state distances over the current episode."""
        return self._sums.T

    def update(
        self, obs: np.ndarray, action: np.ndarray, std: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        if self._compiled_step is not None:
            _check_metric(self.metric, std)
            std = std if self.metric == "wasserstein2" else None
            return self._compiled_step(obs, action, std, self.discount, self._sums, self.counts)
        if self.keep_actions:
            self.reference_actions, d = self.references.actions_and_distances(obs, action, std, self.metric)
        else:
            d = self.references.distances(obs, action, std, self.metric)
        if self.discount != 1.0:  # weights g^(t - t'): scale the past by g before adding this step with weight 1
            self._sums *= self.discount
            self.counts *= self.discount
        self._sums += d.T
        self.counts += 1
        # min_j (sum_j / count) = (min_j sum_j) / count: division by a positive count is monotonic (and exact per value)
        return d, np.minimum.reduce(self._sums, axis=0) / self.counts

    def run(self, d: np.ndarray, done: np.ndarray) -> np.ndarray:
        """`update` for a whole rollout at once, from its per-state distances `d` (T, N, M) (computed for every state
        in one call) and episode ends `done` (T, N): the running novelty u (T, N); an episode that ended at step t is
        forgotten after it, and the episodes still running carry into the next rollout, as step by step.

        Without a discount, one running sum per episode piece (`np.add.accumulate`: the same additions in the same
        order as step by step, so the same bits) instead of a Python step per state; with one, step by step."""
        if self.discount != 1.0:
            return self.run_steps(d, done)
        T, N = done.shape
        u = np.empty((T, N))
        for i in range(N):
            start = 0
            for stop in [*(np.flatnonzero(done[:, i]) + 1).tolist(), T]:
                if stop == start:  # the rollout's last step ended an episode: nothing after it
                    continue
                piece = d[start:stop, i, :]  # (L, M): the states of one episode (or of its part in this rollout)
                piece = np.concatenate([self._sums[:, i][None] + piece[:1], piece[1:]])  # the carried sums, first
                sums = np.add.accumulate(piece, axis=0)
                counts = self.counts[i] + np.arange(1, stop - start + 1, dtype=np.float64)
                u[start:stop, i] = np.minimum.reduce(sums, axis=1) / counts
                ended = bool(done[stop - 1, i])
                self._sums[:, i] = 0.0 if ended else sums[-1]
                self.counts[i] = 0.0 if ended else counts[-1]
                start = stop
        return u

    def run_steps(self, d: np.ndarray, done: np.ndarray) -> np.ndarray:
        """`run`, one step at a time (`update`'s arithmetic): the reference for `run`, and its path with a discount."""
        u = np.empty(d.shape[:2])
        for t in range(d.shape[0]):
            if self.discount != 1.0:
                self._sums *= self.discount
                self.counts *= self.discount
            self._sums += d[t].T
            self.counts += 1
            u[t] = np.minimum.reduce(self._sums, axis=0) / self.counts
            if done[t].any():
                self.reset(done[t])
        return u

    def reset(self, mask: np.ndarray) -> None:
        """Forget the episodes of the masked envs (they ended)."""
        self._sums[:, mask] = 0.0
        self.counts[mask] = 0
