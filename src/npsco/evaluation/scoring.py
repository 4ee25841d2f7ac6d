"""Scoring evaluated policies against their run's PPO references: success and relative novelty (paper Sec. 4.2), then
the statistics per group and task (mean +- std, IQM with bootstrap CIs) and across tasks."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from npsco.evaluation.rows import EvaluationRow, group_sort_key
from npsco.selection import RETURN_RATIO, meets_criteria
from npsco.stats import (
    bootstrap_ci,
    iqm,
    mean_std,
    relative_novelty,
    stratified_bootstrap_ci,
    success_baseline,
    success_flags,
)


def score_rows(
    rows: Sequence[EvaluationRow], ppo_mean_distance: float | None, r0_default: float | None = None
) -> list[EvaluationRow]:
    """The rows with `success`, `success_final`, `success_baseline`, `best_training_eval`, `relative_novelty_paper`,
    `relative_novelty`, `return_ratio`, `nearest_ratio` and `meets` filled in (new rows; the inputs are untouched).

    Each row's `role`, `return_mean`, `eval_curve` ([[step, return], ...] from training) and `novelty` are read.
    The baseline is the median of the references' evaluated returns (paper Sec. 4.2).

    - `success`, the paper's: a novel policy succeeds if its training evaluation curve reached the baseline at some
      evaluation (`npsco.stats.success_flags`; with no curve, its evaluated return stands in); a reference is scored on
      its evaluated (final) return, so PPO's rate is about 0.5 "by definition", as in the paper.
    - `success_final`: every policy, references included, scored alike on its evaluated (final) return.
    - `relative_novelty_paper`, the paper's: novelty / the mean novelty of the references (each one's novelty is its
      distance to its nearest other reference), so the references' mean is 1.
    - `relative_novelty`: novelty / `ppo_mean_distance`, the mean pairwise distance between the references.
    - `return_ratio`: return / the baseline; `nearest_ratio`: a novel policy's `nearest` / `r0_default` (its own
      threshold when the run has no default: an absolute r0); `meets`: both criteria (`meets_criteria`).
    """
    refs = [r.return_mean for r in rows if r.role == "reference"]
    baseline = success_baseline(refs) if refs else None
    ppo_novelty = mean_or_none([r.novelty for r in rows if r.role == "reference"])

    def relative(novelty: float | None, ppo: float | None) -> float | None:
        if novelty is None or ppo is None or ppo <= 0:
            return None
        return float(relative_novelty(novelty, ppo))

    out = []
    for row in rows:
        curve = [p[1] for p in row.eval_curve]
        success = success_final = None
        if baseline is not None:
            success_final = bool(success_flags([[row.return_mean]], refs)[0])
            success = (
                success_final if row.role == "reference" else bool(success_flags([curve or [row.return_mean]], refs)[0])
            )
        r0 = r0_default if r0_default is not None else row.threshold
        nearest_ratio = row.nearest / r0 if row.nearest is not None and r0 else None
        return_ratio = row.return_mean / baseline if baseline else None
        meets = (
            meets_criteria(row.return_mean, baseline, row.nearest, r0)
            if baseline is not None and row.nearest is not None and r0
            else None
        )
        out.append(
            dataclasses.replace(
                row,
                return_ratio=return_ratio,
                nearest_ratio=nearest_ratio,
                meets=meets,
                best_training_eval=max(curve) if curve else None,
                success_baseline=baseline,
                success=success,
                success_final=success_final,
                relative_novelty_paper=relative(row.novelty, ppo_novelty),
                relative_novelty=relative(row.novelty, ppo_mean_distance),
            )
        )
    return out


def metric_summary(values: Iterable[float | None], seed: int = 0) -> dict | None:
    """n, mean +- std (population std, as the paper), IQM with a 95% percentile-bootstrap CI of finite values."""
    x = np.array([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if x.size == 0:
        return None
    mean, std = mean_std(x)
    low, high = bootstrap_ci(x, iqm, seed=seed)
    return {"n": int(x.size), "mean": mean, "std": std, "iqm": float(iqm(x)), "iqm_ci_low": low, "iqm_ci_high": high}


def statistics(rows: Sequence[EvaluationRow]) -> dict:
    """Per group and task: return, relative novelty (both) and state novelty summaries and both success rates; per
    group across tasks: the IQM of returns normalised by each task's success baseline (PPO median), with a
    stratified-bootstrap 95% CI (tasks are the strata)."""
    per_task = []
    keys = sorted({(r.group, r.task) for r in rows}, key=lambda k: (group_sort_key(k[0]), k[1]))
    for group, task in keys:
        sel = [r for r in rows if r.group == group and r.task == task]
        per_task.append(
            {
                "group": group,
                "task": task,
                "n": len(sel),
                "return": metric_summary([r.return_mean for r in sel]),
                "success_rate": _rate([r.success for r in sel]),
                "success_rate_final": _rate([r.success_final for r in sel]),
                "relative_novelty_paper": metric_summary([r.relative_novelty_paper for r in sel]),
                "relative_novelty": metric_summary([r.relative_novelty for r in sel]),
                "state_novelty": metric_summary([r.state_novelty for r in sel]),
                "return_ratio": metric_summary([r.return_ratio for r in sel]),
                "nearest_ratio": metric_summary([r.nearest_ratio for r in sel]),
                "state_distance": metric_summary([r.state_distance for r in sel]),
                "meets_rate": _rate([r.meets for r in sel]),
            }
        )
    aggregate = []
    for group in sorted({r.group for r in rows}, key=group_sort_key):
        scores: dict[str, list[float]] = {}
        for r in rows:
            if r.group == group and r.success_baseline and r.success_baseline > 0:
                scores.setdefault(r.task, []).append(r.return_mean / r.success_baseline)
        if scores:
            est = stratified_bootstrap_ci(scores)
            aggregate.append(
                {
                    "group": group,
                    "tasks": sorted(scores),
                    "n": sum(map(len, scores.values())),
                    "normalized_return_iqm": est.point,
                    "ci_low": est.low,
                    "ci_high": est.high,
                }
            )
    return {
        "per_task": per_task,
        "aggregate": aggregate,
        "definitions": {
            "return": "deterministic return per policy (mean over its evaluation episodes); mean +- std over "
            "policies (population std) and IQM with a 95% percentile-bootstrap CI (2000 resamples)",
            "success_rate": "the paper's: fraction of policies that reached the median evaluated return of the "
            "PPO references (novel policies: at some training evaluation; references: their "
            "evaluated return)",
            "success_rate_final": "fraction of policies (references included) whose evaluated final return "
            "reached the median evaluated return of the PPO references",
            "relative_novelty_paper": "the paper's: novelty / the mean novelty of the PPO references (each one's "
            "distance to its nearest other reference)",
            "relative_novelty": "novelty / the mean pairwise distance between the PPO references",
            "nearest_ratio": "a novel policy's distance to the nearest policy it had to avoid (references and "
            "earlier policies of its chain) / the run's r0_default",
            "meets_rate": f"fraction of novel policies with return >= {RETURN_RATIO} x the references' median and "
            "nearest_ratio >= 1 (the paper's criteria)",
            "normalized_return_iqm": "IQM over all policies of a group of return / the task's success baseline, "
            "95% stratified-bootstrap CI (resampling within each task)",
        },
    }


def _rate(flags: list) -> float | None:
    """The fraction of True among the flags that are not None (None when there is none)."""
    flags = [f for f in flags if f is not None]
    return float(np.mean(flags)) if flags else None


def mean_or_none(values: list) -> float | None:
    """The mean of the values that are not None (None when there is none)."""
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None
