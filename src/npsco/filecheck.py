"""The JSON files npsco reads back from its folders (manifest.json, sweep.json, config.json, threshold.json),
type-checked on load: every field npsco reads has the type npsco writes, or the file is refused in one line that names
the file and the field. A hand-edited, damaged or forged file never reaches the code as an AttributeError or a
TypeError. Fields npsco does not read are not checked (a later npsco may add some).

A spec is a Python type (`str`, `int`, `float` for any number, `bool`, `dict`, `list`, `None`), a tuple of specs (any
of them), `ListOf`, `MapOf`, `Fields`, `OneOf` or `Num` (a number in a range). Numbers are finite (`npsco.io` refuses
NaN, infinity and numbers too large for a float), and every file kind has its size limit (`npsco.limits`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from npsco.errors import NpscoError
from npsco.io import read_json
from npsco.limits import (
    MAX_ENVS,
    MAX_EPISODE_STEPS,
    MAX_EPISODES,
    MAX_LAYER,
    MAX_POLICIES,
    MAX_RECORDED_SEED,
    MAX_ROLLOUT_STEPS,
    MAX_TIMESTEPS,
)


@dataclass(frozen=True)
class ListOf:
    """A list whose items all match `item`; of exactly `length` items when given."""

    item: Any
    length: int | None = None


@dataclass(frozen=True)
class Num:
    """A number (`whole`: a whole number) in [least, most]; `positive`: above `least` (0 by default)."""

    least: float | None = None
    most: float | None = None
    whole: bool = False
    positive: bool = False

    def contains(self, value: float) -> bool:
        """Whether a number of the right type lies in the range."""
        low = 0.0 if self.positive and self.least is None else self.least
        if low is not None and (value <= low if self.positive else value < low):
            return False
        return self.most is None or value <= self.most

    def words(self) -> str:
        """The range in words: `a whole number from 1 to 100,000`, `a number above 0`."""
        kind = "a whole number" if self.whole else "a number"
        low = 0.0 if self.positive and self.least is None else self.least
        if self.positive:
            return f"{kind} above {low:g}" + ("" if self.most is None else f" and at most {self.most:,}")
        if low is not None and self.most is not None:
            return f"{kind} from {low:,g} to {self.most:,}"
        return f"{kind} >= {low:g}" if low is not None else f"{kind} <= {self.most:,}"


@dataclass(frozen=True)
class MapOf:
    """An object whose values all match `value`."""

    value: Any


@dataclass(frozen=True)
class OneOf:
    """One of these strings."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class Fields:
    """An object with these fields (others are allowed and not checked); `required` must be present."""

    fields: dict[str, Any]
    required: tuple[str, ...] = field(default=())


_NAMES = {
    str: ("a string", "strings"),
    int: ("a whole number", "whole numbers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "booleans"),
    dict: ("an object", "objects"),
    list: ("a list", "lists"),
    None: ("null", "nulls"),
}


def describe(spec: Any, plural: bool = False) -> str:
    """What a spec asks for, in words: `a list of numbers`, `a string or null`."""
    if isinstance(spec, tuple):
        return " or ".join(describe(s, plural) for s in spec)
    if isinstance(spec, ListOf):
        size = "" if spec.length is None else f" {spec.length}"
        return "lists" if plural else f"a list of{size} {describe(spec.item, plural=True)}"
    if isinstance(spec, Num):
        return ("whole numbers" if spec.whole else "numbers") if plural else spec.words()
    if isinstance(spec, MapOf):
        return "objects" if plural else f"an object of {describe(spec.value, plural=True)}"
    if isinstance(spec, Fields):
        return "objects" if plural else "an object"
    if isinstance(spec, OneOf):
        return "one of " + ", ".join(repr(v) for v in spec.values)
    return _NAMES[spec][1 if plural else 0]


def _matches_type(value: Any, spec: Any) -> bool:
    if spec is None:
        return value is None
    if spec is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if spec is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, spec)


def _shown(value: Any) -> str:
    text = "null" if value is None else repr(value)
    return (
        text if len(text) <= 40 else f"{type(value).__name__} of {len(value)}" if hasattr(value, "__len__") else "..."
    )


def problem(value: Any, spec: Any, where: str) -> str | None:
    """What is wrong with `value` against `spec` (`where` names it, e.g. `members[2].path`), or None. Walks nested
    lists and objects with an explicit stack (no recursion)."""
    stack = [(value, spec, where)]
    while stack:
        value, spec, where = stack.pop()
        options = spec if isinstance(spec, tuple) else (spec,)
        matching = [s for s in options if _matches(value, s)]
        if not matching:
            return f"{where or 'the file'} must be {describe(spec)}, got {_shown(value)}"
        match = matching[0]
        if isinstance(match, Num) and not match.contains(value):
            return f"{where or 'the file'} must be {describe(spec)}, got {_shown(value)}"
        if isinstance(match, ListOf):
            if match.length is not None and len(value) != match.length:
                return f"{where or 'the file'} must be {describe(match)}, got {_shown(value)}"
            stack.extend((v, match.item, f"{where}[{i}]") for i, v in enumerate(value))
        elif isinstance(match, MapOf):
            stack.extend((v, match.value, _join(where, k)) for k, v in value.items())
        elif isinstance(match, Fields):
            missing = [k for k in match.required if k not in value]
            if missing:
                return f"{_join(where, missing[0])} is missing"
            stack.extend((value[k], s, _join(where, k)) for k, s in match.fields.items() if k in value)
    return None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _matches(value: Any, spec: Any) -> bool:
    """Whether `value` has the outer type of `spec` (what is inside is checked by `problem`)."""
    if isinstance(spec, ListOf):
        return isinstance(value, list)
    if isinstance(spec, (MapOf, Fields)):
        return isinstance(value, dict)
    if isinstance(spec, OneOf):
        return isinstance(value, str) and value in spec.values
    if isinstance(spec, Num):
        return _matches_type(value, int if spec.whole else float)
    return _matches_type(value, spec)


def check(value: Any, spec: Any, file: str | os.PathLike, hint: str = "") -> Any:
    """`value` (read from `file`) if it matches `spec`, else a one-line NpscoError naming the file and the field."""
    found = problem(value, spec, "")
    if found is not None:
        raise NpscoError(f"{file}: {found}{hint}")
    return value


def read_checked(path: str | os.PathLike, spec: Any) -> Any:
    """A JSON file (`npsco.io.read_json`, its kind's size limit), type- and range-checked against `spec`."""
    return check(read_json(path), spec, path)


# ------------------------------------------------------------------------------------------------------ the numbers
COUNT = Num(0, whole=True)
"""A whole number >= 0 (steps, indices, counts)."""
SEED = Num(0, MAX_RECORDED_SEED, whole=True)
"""A seed (a population adds offsets to the configured one, < 2^31)."""
EPISODES = Num(1, MAX_EPISODES, whole=True)
POLICIES = Num(0, MAX_POLICIES, whole=True)
POSITIVE = Num(positive=True)
"""A number above 0 (a threshold, a bandwidth)."""
NONNEGATIVE = Num(0)
"""A number >= 0 (a distance, a duration)."""
VERSION = Num(1, whole=True)
"""A format version (1, 2, ...)."""
EVAL_CURVE = ListOf(ListOf(float, length=2))
"""A training curve: [global step, evaluation return] points."""


# ------------------------------------------------------------------------------------------------------ the files
FINAL_EVAL = Fields(
    {
        "episodes": EPISODES,
        "seed": SEED,
        "return_mean": float,
        "return_std": NONNEGATIVE,
        "return_min": float,
        "return_max": float,
        "length_mean": NONNEGATIVE,
        "goals": MapOf(COUNT),
    },
    required=("return_mean", "return_std"),
)
"""A member's `final_eval` (`npsco.evaluation.Episodes.summary`)."""

STATUS = OneOf(("pending", "training", "done"))

MEMBER = Fields(
    {
        "name": str,
        "role": OneOf(("reference", "novel")),
        "method": str,
        "seed": SEED,
        "path": str,
        "chain": (str, None),
        "index": (COUNT, None),
        "threshold": (POSITIVE, None),
        "references": ListOf(str),
        "status": STATUS,
        "final_eval": (FINAL_EVAL, None),
        "eval_curve": EVAL_CURVE,
        "wall_seconds": (NONNEGATIVE, None),
        "sha256": (str, None),
        "candidates": ListOf(
            Fields(
                {
                    "index": COUNT,
                    "seed": SEED,
                    "path": str,
                    "status": STATUS,
                    "final_eval": (FINAL_EVAL, None),
                    "eval_curve": EVAL_CURVE,
                    "wall_seconds": (NONNEGATIVE, None),
                    "nearest": (NONNEGATIVE, None),
                    "meets": (bool, None),
                    "kept": bool,
                },
                required=("index", "seed", "path"),
            )
        ),
    },
    required=("name", "role", "method", "seed", "path"),
)
"""One member of manifest.json (`npsco.manifest.Member`)."""

MANIFEST = Fields(
    {
        "format": str,
        "format_version": VERSION,
        "env_id": str,
        "method": str,
        "r0_default": (POSITIVE, None),
        "members": ListOf(MEMBER),
    },
    required=("format", "env_id", "members"),
)
"""A population run's manifest.json."""

PPO_SETTINGS = Fields(
    {
        "env_id": str,
        "seed": SEED,
        "max_episode_steps": (Num(1, MAX_EPISODE_STEPS, whole=True), None),
        "total_timesteps": Num(1, MAX_TIMESTEPS, whole=True),
        "num_envs": Num(1, MAX_ENVS, whole=True),
        "num_steps": Num(1, MAX_ROLLOUT_STEPS, whole=True),
        "eval_every": COUNT,
        "eval_episodes": EPISODES,
        "actor_hidden": ListOf(Num(1, MAX_LAYER, whole=True)),
        "critic_hidden": ListOf(Num(1, MAX_LAYER, whole=True)),
    },
    required=("env_id",),
)
"""The PPO settings a run's config.json records (those npsco reads back, with their ranges; the others are compared
as they are)."""

POPULATION_CONFIG = Fields(
    {
        "ppo": PPO_SETTINGS,
        "method": Fields({"method": str, "r0": (POSITIVE, None)}),
        "refs": POLICIES,
        "novel": POLICIES,
        "r0_scales": (ListOf(POSITIVE), None),
        "refs_from": (str, None),
        "ref_checkpoints": ListOf(str),
        "threshold_episodes": (EPISODES, None),
        "eval_episodes": (EPISODES, None),
        "candidate_episodes": (EPISODES, None),
    }
)
"""A population run's config.json (`npsco.population_config.PopulationConfig.to_dict`)."""

TRAIN_CONFIG = Fields({"command": str, "preset": str, "ppo": PPO_SETTINGS})
"""An `npsco train` run's config.json."""

THRESHOLD = Fields(
    {
        "r0_default": POSITIVE,
        "names": ListOf(str),
        "distance_matrix": ListOf(ListOf(NONNEGATIVE)),
        "episodes_per_policy": EPISODES,
        "seed": SEED,
        "metric": str,
        "profile": ListOf(float),
        "profile_discount": NONNEGATIVE,
        "state": Fields(
            {
                "mean": ListOf(float),
                "std": ListOf(NONNEGATIVE),
                "bandwidth": POSITIVE,
                "seed": SEED,
                "embeddings": ListOf(ListOf(float)),
            },
            required=("mean", "std", "bandwidth", "seed", "embeddings"),
        ),
    },
    required=("r0_default",),
)
"""A population run's threshold.json (`npsco.novelty.threshold.Threshold.to_dict`)."""

SWEEP = Fields(
    {
        "format": str,
        "format_version": VERSION,
        "name": str,
        "grid_file": (str, None),
        "grid": dict,
        "backend": str,
        "status": str,
        "wall_seconds": NONNEGATIVE,
        "utilisation": (
            Fields(
                {"workers": COUNT, "wall_seconds": NONNEGATIVE, "busy_seconds": NONNEGATIVE, "fraction": NONNEGATIVE}
            ),
            None,
        ),
        "populations": ListOf(
            Fields(
                {
                    "task": str,
                    "method": str,
                    "path": str,
                    "references_from": (str, None),
                    "chains": ListOf(str),
                    "policies": COUNT,
                    "done": COUNT,
                    "status": str,
                    "r0_default": (POSITIVE, None),
                    "return_mean": (float, None),
                },
                required=("path",),
            )
        ),
    }
)
"""A sweep folder's sweep.json."""

METRICS_ROW = Fields({"global_step": COUNT, "eval/return_mean": (float, None)}, required=("global_step",))
"""A row of metrics.jsonl (`npsco.logger`): the fields npsco reads back (a member's training curve)."""
