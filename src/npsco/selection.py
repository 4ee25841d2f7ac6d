"""The paper's criteria for a novel policy (`meets_criteria`), and the selection among candidates: a population may
train several candidates for one slot of a chain (`--candidates C`) and keep one, as the IPD authors' own code did.
The rule, deterministic whatever order the candidates finish in:

- keep the **first** candidate (lowest index) that meets the criteria (`meets_criteria`: final return >=
  RETURN_RATIO x the references' median, distance to the nearest policy it had to avoid >= its threshold),
  decided as soon as it and every candidate before it are trained;
- if none of the C does, keep the **best**: the highest `score`, the smaller of its two criteria's ratios (return /
  RETURN_RATIO x median, nearest / threshold), so the one that comes closest to meeting both; a tie goes to the
  higher return, then to the lower index.

The other candidates are dropped, recorded in the manifest with their numbers (never hidden); candidates after the
kept one that were not started are not trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RETURN_RATIO = 0.8
"""The paper's criteria for a novel policy: return >= RETURN_RATIO x the references' median, and a distance to the
nearest policy it had to avoid >= the threshold (`meets_criteria`)."""


def meets_criteria(return_mean: float, baseline: float, nearest: float, threshold: float) -> bool:
    """The paper's criteria: return_mean >= RETURN_RATIO x baseline (the references' median return) and
    nearest >= threshold."""
    return return_mean >= RETURN_RATIO * baseline and nearest >= threshold


@dataclass(frozen=True)
class Trained:
    """A trained candidate's numbers, as its final evaluation measured them."""

    index: int
    """Its place among the slot's candidates (0 is the slot's own seed)."""
    return_mean: float
    """Its final deterministic return."""
    nearest: float
    """Its distance to the nearest policy it had to avoid, on its final evaluation's states."""


def score(candidate: Trained, baseline: float, threshold: float) -> float:
    """min(return / (RETURN_RATIO x baseline), nearest / threshold): at least 1 exactly when the candidate meets both
    criteria (for a positive baseline)."""
    bar = RETURN_RATIO * baseline
    by_return = candidate.return_mean / bar if bar > 0 else (float("inf") if candidate.return_mean >= bar else 0.0)
    return min(by_return, candidate.nearest / threshold)


def choose(trained: Sequence[Trained], count: int, baseline: float, threshold: float) -> int | None:
    """The index of the candidate to keep among `count`, given those `trained` so far; None while it is not decided
    (a candidate before the first one that meets is still to be trained, or not all failed yet)."""
    done = {c.index: c for c in trained}
    for i in range(count):
        if i not in done:
            return None
        c = done[i]
        if meets_criteria(c.return_mean, baseline, c.nearest, threshold):
            return i
    best = max(done.values(), key=lambda c: (score(c, baseline, threshold), c.return_mean, -c.index))
    return best.index
