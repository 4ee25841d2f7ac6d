"""The JSON files npsco reads back from its folders (manifest.json, sweep.json, config.json, threshold.json),
type-checked on load: every field npsco reads has the type npsco writes, or the file is refused in one line that names
the file and the field. A hand-edited, damaged or forged file never reaches the code as an AttributeError or a
TypeError. Fields npsco does not read are not checked (a later npsco may add some).

A spec is a Python type (`str`, `int`, `float` for any number, `bool`, `dict`, `list`, `None`), a tuple of specs (any
of them), `ListOf`, `MapOf`, `Fields` or `OneOf`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from npsco.errors import NpscoError
from npsco.io import read_json


@dataclass(frozen=True)
class ListOf:
    """A list whose items all match `item`."""

    item: Any


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
        return "lists" if plural else f"a list of {describe(spec.item, plural=True)}"
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
        if isinstance(match, ListOf):
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
    return _matches_type(value, spec)


def check(value: Any, spec: Any, file: str | os.PathLike, hint: str = "") -> Any:
    """`value` (read from `file`) if it matches `spec`, else a one-line NpscoError naming the file and the field."""
    found = problem(value, spec, "")
    if found is not None:
        raise NpscoError(f"{file}: {found}{hint}")
    return value


def read_checked(path: str | os.PathLike, spec: Any) -> Any:
    """A JSON file (`npsco.io.read_json`), type-checked against `spec`."""
    return check(read_json(path), spec, path)


# ------------------------------------------------------------------------------------------------------ the files
FINAL_EVAL = Fields(
    {
        "episodes": int,
        "seed": int,
        "return_mean": float,
        "return_std": float,
        "return_min": float,
        "return_max": float,
        "length_mean": float,
        "goals": MapOf(int),
    },
    required=("return_mean", "return_std"),
)
"""A member's `final_eval` (`npsco.evaluation.Episodes.summary`)."""

MEMBER = Fields(
    {
        "name": str,
        "role": OneOf(("reference", "novel")),
        "method": str,
        "seed": int,
        "path": str,
        "chain": (str, None),
        "index": (int, None),
        "threshold": (float, None),
        "references": ListOf(str),
        "status": OneOf(("pending", "training", "done")),
        "final_eval": (FINAL_EVAL, None),
        "eval_curve": ListOf(ListOf(float)),
        "wall_seconds": (float, None),
        "sha256": (str, None),
        "candidates": ListOf(
            Fields(
                {
                    "index": int,
                    "seed": int,
                    "path": str,
                    "status": OneOf(("pending", "training", "done")),
                    "final_eval": (FINAL_EVAL, None),
                    "eval_curve": ListOf(ListOf(float)),
                    "wall_seconds": (float, None),
                    "nearest": (float, None),
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
        "format_version": int,
        "env_id": str,
        "method": str,
        "r0_default": (float, None),
        "members": ListOf(MEMBER),
    },
    required=("format", "env_id", "members"),
)
"""A population run's manifest.json."""

PPO_SETTINGS = Fields({"env_id": str, "seed": int, "max_episode_steps": (int, None)}, required=("env_id",))
"""The PPO settings a run's config.json records (those npsco reads back; the others are compared as they are)."""

POPULATION_CONFIG = Fields(
    {
        "ppo": PPO_SETTINGS,
        "method": Fields({"method": str, "r0": (float, None)}),
        "refs": int,
        "novel": int,
        "r0_scales": (ListOf(float), None),
        "refs_from": (str, None),
        "ref_checkpoints": ListOf(str),
        "threshold_episodes": (int, None),
        "eval_episodes": (int, None),
        "candidate_episodes": (int, None),
    }
)
"""A population run's config.json (`npsco.population_config.PopulationConfig.to_dict`)."""

TRAIN_CONFIG = Fields({"command": str, "preset": str, "ppo": PPO_SETTINGS})
"""An `npsco train` run's config.json."""

THRESHOLD = Fields(
    {
        "r0_default": float,
        "names": ListOf(str),
        "distance_matrix": ListOf(ListOf(float)),
        "episodes_per_policy": int,
        "seed": int,
        "metric": str,
        "profile": ListOf(float),
        "profile_discount": float,
        "state": Fields(
            {
                "mean": ListOf(float),
                "std": ListOf(float),
                "bandwidth": float,
                "seed": int,
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
        "format_version": int,
        "name": str,
        "grid_file": (str, None),
        "grid": dict,
        "backend": str,
        "status": str,
        "wall_seconds": float,
        "utilisation": (
            Fields({"workers": int, "wall_seconds": float, "busy_seconds": float, "fraction": float}),
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
                    "policies": int,
                    "done": int,
                    "status": str,
                    "r0_default": (float, None),
                    "return_mean": (float, None),
                },
                required=("path",),
            )
        ),
    }
)
"""A sweep folder's sweep.json."""
