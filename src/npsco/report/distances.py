"""The report's "who is near whom": per task, the action distance D between every pair of its policies (references
and novel policies of every method), in one matrix ordered by method and chain.

Each run's evaluation holds D for the pairs inside that run (`action_distance_matrix`); policies of different runs
(IPD's and WSR's novel policies, both borrowing the same references) meet in no run, so their rows are measured here,
with the evaluation's own episodes and seed (the same numbers the evaluation gives for the pairs it has).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npsco.evaluation.measure import MeasureCache, action_distance_row, measure_policy
from npsco.evaluation.rows import group_sort_key
from npsco.novelty.references import ReferenceSet
from npsco.policy import load_policy


@dataclass
class DistanceMatrix:
    """D over the policies of one task: `matrix[i, j]` = mean over the states visited by policy i of
    ||mu_i(s) - mu_j(s)||, the executed deterministic actions (0 on the diagonal; not symmetric)."""

    task: str
    labels: list[str]
    """One per policy, in matrix order: its name in its run (e.g. `ref0`, `ipd-r0x2/k1`)."""
    groups: list[str]
    """The method or chain of each policy (`ppo` for the references), the order's first key."""
    checkpoints: list[str]
    matrix: np.ndarray


def policy_order(rows: list[dict]) -> list[int]:
    """Indices of `rows` ordered by group (PPO, then the paper's method order, chains by threshold), then by position
    in the chain (k0, k1, ...), then name."""

    def key(i: int) -> tuple:
        r = rows[i]
        index = r["name"].rsplit("/k", 1)[-1] if "/k" in r["name"] else ""
        return (group_sort_key(r["group"]), int(index) if index.isdigit() else -1, r["name"], r["checkpoint"])

    return sorted(range(len(rows)), key=key)


def known_distances(checkpoints: list[str], docs: list[dict]) -> np.ndarray:
    """D between `checkpoints` as far as the runs' evaluations give it; NaN for the pairs no run holds."""
    where = {c: i for i, c in enumerate(checkpoints)}
    matrix = np.full((len(checkpoints), len(checkpoints)), np.nan)
    np.fill_diagonal(matrix, 0.0)
    for doc in docs:
        by_name = {r["name"]: r["checkpoint"] for r in doc["policies"]}
        block = doc.get("action_distance_matrix") or {}
        names = block.get("names") or []
        for a, row in zip(names, block.get("matrix") or [], strict=True):
            for b, value in zip(names, row, strict=True):
                i, j = where.get(by_name.get(a, "")), where.get(by_name.get(b, ""))
                if i is not None and j is not None and value is not None:
                    matrix[i, j] = value
    return matrix


def task_distances(
    task: str,
    rows: list[dict],
    docs: list[dict],
    configs: dict[str, dict],
    cache: MeasureCache | None = None,
    log: Callable[[str], None] = print,
) -> DistanceMatrix:
    """The full D of a task's policies: the evaluations' entries, and the missing rows measured with the time limit of
    their run (`configs`: each run's config.json, by run as the docs name it; `cache` shares the evaluation's
    measurements, keyed as `npsco.evaluation.evaluate.evaluate_run` keys them)."""
    mine = [r for r in rows if r["task"] == task]
    mine = [mine[i] for i in policy_order(mine)]
    checkpoints = [r["checkpoint"] for r in mine]
    matrix = known_distances(checkpoints, [d for d in docs if any(r["task"] == task for r in d["policies"])])
    missing = [i for i in range(len(mine)) if np.isnan(matrix[i]).any()]
    if missing:
        log(f"  distances between the {len(mine)} policies of {task}: measuring {len(missing)} of them")
        cache = {} if cache is None else cache
        policies = [load_policy(c) for c in checkpoints]
        everyone = ReferenceSet(policies, exact=True)
        settings = {d["run"]: (d["settings"]["episodes"], d["settings"]["seed"]) for d in docs}
        for i in missing:
            episodes, seed = settings[mine[i]["run"]]
            key = (str(Path(checkpoints[i]).resolve()), episodes, seed)  # the rows' paths are relative (portable)
            if key not in cache:
                limit = (configs.get(mine[i]["run"], {}).get("ppo") or {}).get("max_episode_steps")
                cache[key] = measure_policy(policies[i], episodes, seed, limit)
            matrix[i] = action_distance_row(everyone, i, cache[key])
    return DistanceMatrix(
        task=task,
        labels=[r["name"] for r in mine],
        groups=[r["group"] for r in mine],
        checkpoints=checkpoints,
        matrix=matrix,
    )
