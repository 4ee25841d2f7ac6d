"""One policy's evaluation as a typed row (`EvaluationRow`): the columns of `evaluation.csv` are its fields, in order
(`CSV_COLUMNS`), and an evaluation document's `policies` hold its dicts (`to_dict`); and the group a row is
aggregated under (`group_of`), in the paper's order (`group_sort_key`). docs/report.md describes every column."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npsco.filecheck import EPISODES, EVAL_CURVE, NONNEGATIVE, POSITIVE, SEED, Fields, ListOf, MapOf
from npsco.manifest import Chain
from npsco.methods.registry import METHODS, default_r0_scale

PAPER_ORDER = ("ppo", "wsr", "tnb", "cpo", "ctnb", "ipd")
"""Order of the methods in Table 1 (the paper's); other groups follow."""

_JSON_ONLY = {"csv": False}
"""Field metadata: the evaluation document holds the field, evaluation.csv has no column for it."""
_MAZE_ONLY = {"maze": True}
"""Field metadata: on the maze only; the document leaves the key out elsewhere (its value is None there)."""


@dataclass(kw_only=True)
class EvaluationRow:
    """One policy of a population run, evaluated (`npsco.evaluation.evaluate.evaluate_run`); scores are filled in by
    `npsco.evaluation.scoring.score_rows`. The fields are the CSV's columns, in their order, then the document's
    per-episode data."""

    run: str
    """The population run directory."""
    env: str
    task: str
    """The task's short name (`npsco.tasks.task_name`)."""
    group: str
    """What the row is aggregated under (`group_of`)."""
    method: str
    chain: str | None = None
    """The name of the novel policy's chain (`npsco.manifest.Chain.name`); None for references."""
    name: str
    role: str
    seed: int
    threshold: float | None = None
    r0_scale: float | None = None
    """The multiple of the default r0 a novel policy trained at (None for references, PPO seeds, an absolute r0)."""
    episodes: int
    eval_seed: int
    return_mean: float
    return_std: float
    return_min: float
    return_max: float
    length_mean: float
    novelty: float | None = None
    relative_novelty_paper: float | None = None
    relative_novelty: float | None = None
    state_novelty: float | None = None
    nearest: float | None = None
    """A novel policy's distance to the nearest policy it had to avoid (its manifest `references`)."""
    nearest_ratio: float | None = None
    """`nearest` / the run's r0_default (the paper's threshold, 1x; the member's own threshold with an absolute r0)."""
    state_distance: float | None = None
    """A novel policy's MMD to the nearest policy it had to avoid, between visited states (`npsco.novelty.states`)."""
    return_ratio: float | None = None
    """Return / the median return of the run's references (the success baseline)."""
    meets: bool | None = None
    """A novel policy meets the paper's criteria: return_ratio >= `RETURN_RATIO` and nearest_ratio >= 1
    (`npsco.selection.meets_criteria`)."""
    yardstick: int | None = None
    """A novel policy is more different than this many of the run's references are from the others: the count of
    references whose leave-one-out nearest distance (to the nearest other reference, on their own states) is below
    the policy's `nearest` (`yardstick`). Reported, never a criterion."""
    yardstick_of: int | None = None
    """The number of references `yardstick` counts from."""
    forward_speed: float | None = None
    """MuJoCo locomotion: mean forward velocity of the root over the evaluation's steps, m/s
    (`npsco.evaluation.descriptors`)."""
    step_frequency: float | None = None
    """MuJoCo locomotion: touchdowns (a foot's contact beginning) per second, averaged over the feet."""
    height_mean: float | None = None
    """MuJoCo locomotion: mean torso height (the root's z), m."""
    height_std: float | None = None
    """Its std over the steps, m."""
    pitch_mean: float | None = None
    """MuJoCo locomotion: mean torso pitch (the root's rotation about y), rad."""
    pitch_std: float | None = None
    """Its std over the steps, rad."""
    duty: dict[str, float] | None = field(default=None, metadata=_JSON_ONLY)
    """MuJoCo locomotion: per foot, the fraction of steps it touches the floor."""
    candidates: int | None = None
    """With `--candidates`: how many candidates were trained for the policy's slot (the others were dropped)."""
    candidate: int | None = None
    """With `--candidates`: which of them this policy is (0: the slot's own seed)."""
    success: bool | None = None
    success_final: bool | None = None
    best_training_eval: float | None = None
    success_baseline: float | None = None
    goal_top: float | None = field(default=None, metadata=_MAZE_ONLY)
    goal_bottom: float | None = field(default=None, metadata=_MAZE_ONLY)
    goal_left: float | None = field(default=None, metadata=_MAZE_ONLY)
    goal_right: float | None = field(default=None, metadata=_MAZE_ONLY)
    goal_none: float | None = field(default=None, metadata=_MAZE_ONLY)
    goal_from_right: str | None = field(default=None, metadata=_MAZE_ONLY)
    checkpoint: str
    eval_curve: list[list[float]] = field(default_factory=list, metadata=_JSON_ONLY)
    """[global step, evaluation return] during training."""
    returns: list[float] = field(default_factory=list, metadata=_JSON_ONLY)
    episode_seeds: list[int] = field(default_factory=list, metadata=_JSON_ONLY)
    fig2_trajectory: list[list[float]] | None = field(default=None, metadata={**_JSON_ONLY, **_MAZE_ONLY})

    def to_dict(self) -> dict[str, Any]:
        """The row as an evaluation document holds it (the maze's keys only on the maze)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("maze"):
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluationRow:
        """A row of an evaluation document (keys of other versions are left out)."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})

    def csv_cells(self) -> list[str]:
        """The row's cells in `CSV_COLUMNS` order: empty where a value does not apply."""
        return ["" if getattr(self, c) is None else _cell(getattr(self, c)) for c in CSV_COLUMNS]


_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "None": None,
    "list[float]": ListOf(float),
    "list[int]": ListOf(int),
    "list[list[float]]": ListOf(ListOf(float)),
    "dict[str, float]": MapOf(float),
}
_RANGES: dict[str, Any] = {
    "seed": SEED,
    "eval_seed": SEED,
    "episodes": EPISODES,
    "threshold": POSITIVE,
    "eval_curve": EVAL_CURVE,
    "length_mean": NONNEGATIVE,
    "return_std": NONNEGATIVE,
}
"""Fields of a row whose range is checked, beside their type."""


def _field_spec(f: dataclasses.Field) -> Any:
    """The `npsco.filecheck` spec of one field of `EvaluationRow`, from its annotation (and `_RANGES`)."""
    options = tuple(_RANGES.get(f.name, _TYPES[t]) if t != "None" else None for t in str(f.type).split(" | "))
    return options[0] if len(options) == 1 else options


ROW = Fields(
    {f.name: _field_spec(f) for f in dataclasses.fields(EvaluationRow)},
    required=tuple(
        f.name
        for f in dataclasses.fields(EvaluationRow)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ),
)
"""A row of an evaluation document (`EvaluationRow.to_dict`), every field type- and range-checked when a document is
read back (`npsco.evaluation.evaluate.cached_evaluation`)."""


CSV_COLUMNS = tuple(f.name for f in dataclasses.fields(EvaluationRow) if f.metadata.get("csv", True))
"""Columns of `evaluation.csv`, one row per policy (docs/report.md says what each means)."""


def rows_to_csv(rows: Iterable[EvaluationRow | Mapping[str, Any]]) -> str:
    """The tidy CSV text of per-policy rows (typed, or the dicts of an evaluation document)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow((row if isinstance(row, EvaluationRow) else EvaluationRow.from_dict(row)).csv_cells())
    return buffer.getvalue()


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if not np.isfinite(value) else repr(round(value, 6))
    return str(value)


# ----------------------------------------------------------------------------------------------------------- groups
def group_of(role: str, method: str, chain: Chain | None, primary_scale: float = 1.0) -> str:
    """The label a policy is aggregated under: `ppo` for the references, else its chain's name, where the chain at
    the run's primary threshold multiple (the first of its `r0_scales`: the first `--r0-scale`, or the task's default
    multiple when none was given) counts as the method itself (`ipd`); the run's other multiples keep their names."""
    if role == "reference":
        return "ppo"
    if chain is None:
        return method
    if chain.scale is not None and chain.scale == primary_scale:
        return chain.method
    return chain.name


def separate_scales(rows: list[dict]) -> list[dict]:
    """Rows of several runs (evaluation-document dicts) with each method label naming one threshold: where runs of a
    task put chains at different multiples under the same method label (each run's primary chain is `ipd`), the
    rows at 1x (the paper's threshold) keep it and the others take their chain's scaled name (`ipd-r0x0.5`)."""
    scales: dict[tuple[str, str], set] = {}
    for r in rows:
        if r["role"] != "reference" and r["group"] == r["method"]:
            scales.setdefault((r["env"], r["group"]), set()).add(r.get("r0_scale"))
    mixed = {key for key, found in scales.items() if len(found) > 1}
    return [
        {**r, "group": Chain(r["method"], r["r0_scale"]).name}
        if (r["env"], r["group"]) in mixed and r["group"] == r["method"] and r.get("r0_scale") not in (None, 1.0)
        else r
        for r in rows
    ]


def primary_scale(config: dict) -> float:
    """The first threshold multiple of a population run's config.json (its method's default when it records none)."""
    method = str((config.get("method") or {}).get("method", "ipd"))
    scales = config.get("r0_scales") or [default_r0_scale(method if method in METHODS else "ipd")]
    return float(scales[0])


def group_sort_key(group: str) -> tuple:
    """Paper order of methods (PPO, WSR, TNB, CPO, CTNB, IPD), then others alphabetically; scaled chains by scale."""
    chain = Chain.parse(group)
    rank = PAPER_ORDER.index(chain.method) if chain.method in PAPER_ORDER else len(PAPER_ORDER)
    return (rank, chain.method, -1.0 if chain.scale is None else chain.scale, group)
