"""numpy's sums, compiled (numba) with numpy's order of additions, so that a kernel that sums gets numpy's bits.

`np.add.reduce` of a contiguous 1-D array is a pairwise sum (blocks of at most 128 values summed by 8 interleaved
accumulators, longer runs split in halves); the sum over axis 0 of a C-contiguous (R, C) array adds the rows one after
the other, except for C = 1, where it is the pairwise sum of the column. Float rounding depends on that order, so the
kernels built on these (`npsco.ppo._rollout_kernels`, `npsco.ppo._update_kernels`) follow it exactly; the sums are in
the array's own dtype, as numpy's. tests/unit/test_numpy_sums.py checks them against numpy, bit for bit.

No fastmath anywhere: the additions happen in the written order, none is fused or reassociated.
"""

from __future__ import annotations

import numba
import numpy as np

jit = numba.njit(error_model="numpy", cache=True)
"""The compiler settings of npsco.ppo's kernels: IEEE arithmetic in the written order (no fastmath, so no fused
multiply-adds and no reassociation), numpy's error model (a division by zero gives inf or NaN, as in numpy)."""

_BLOCK = 128
"""numpy's PW_BLOCKSIZE: the longest run that its pairwise sum adds with 8 accumulators without splitting it."""


@jit
def _block_sum(a: np.ndarray, start: int, n: int, stride: int) -> float:
    """numpy's pairwise sum of a run of 1 <= n <= 128 values: sequential below 8, else 8 interleaved accumulators."""
    if n < 8:
        res = a[start]
        for i in range(1, n):
            res += a[start + i * stride]
        return res
    r0, r1, r2, r3 = a[start], a[start + stride], a[start + 2 * stride], a[start + 3 * stride]
    r4, r5, r6, r7 = a[start + 4 * stride], a[start + 5 * stride], a[start + 6 * stride], a[start + 7 * stride]
    i = 8
    whole = n - n % 8
    while i < whole:
        k = start + i * stride
        r0 += a[k]
        r1 += a[k + stride]
        r2 += a[k + 2 * stride]
        r3 += a[k + 3 * stride]
        r4 += a[k + 4 * stride]
        r5 += a[k + 5 * stride]
        r6 += a[k + 6 * stride]
        r7 += a[k + 7 * stride]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[start + i * stride]
        i += 1
    return res


@jit
def pairwise_sum(a: np.ndarray, start: int, n: int, stride: int) -> float:
    """The sum of a[start], a[start + stride], ..., n values (n >= 1) of the 1-D `a`, in numpy's pairwise order: runs
    longer than 128 split in two halves (the first a multiple of 8 long), summed each, then added. The recursion is
    unrolled onto a stack (numba's cache does not load recursive functions back)."""
    if n <= _BLOCK:
        return _block_sum(a, start, n, stride)
    # a depth-first walk of the halving tree: per level, the node's run and, once its first half is summed, that sum
    starts, lengths = np.empty(64, np.int64), np.empty(64, np.int64)
    firsts, first_done = np.empty(64, a.dtype), np.zeros(64, np.bool_)
    starts[0], lengths[0], top = start, n, 0
    while True:
        m = lengths[top]
        if m > _BLOCK:  # descend into the first half
            half = m // 2
            half -= half % 8
            top += 1
            starts[top], lengths[top], first_done[top] = starts[top - 1], half, False
            continue
        value = _block_sum(a, starts[top], m, stride)
        top -= 1
        while top >= 0 and first_done[top]:  # a second half done: its node's sum is first + second
            value = firsts[top] + value
            top -= 1
        if top < 0:
            return value
        # the first half of node `top` is done: keep it, go to its second half
        firsts[top], first_done[top] = value, True
        half = lengths[top] // 2
        half -= half % 8
        top += 1
        starts[top], lengths[top], first_done[top] = starts[top - 1] + half * stride, lengths[top - 1] - half, False


@jit
def reduce_sum(a: np.ndarray) -> float:
    """`np.add.reduce(a)` of a non-empty 1-D array."""
    return pairwise_sum(a, 0, a.size, 1)


@jit
def column_sums(x: np.ndarray, out: np.ndarray) -> None:
    """out = `np.add.reduce(x, axis=0)` of a C-contiguous (R, C) array, R >= 1, in x's dtype."""
    rows, cols = x.shape
    if cols == 1:
        out[0] = pairwise_sum(x[:, 0], 0, rows, 1)
        return
    for j in range(cols):
        out[j] = x[0, j]
    for i in range(1, rows):
        for j in range(cols):
            out[j] += x[i, j]
