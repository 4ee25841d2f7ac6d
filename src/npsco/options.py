"""The options of `npsco train` (`TrainOptions`) and `npsco population` (`PopulationOptions`, also one population of a
sweep's grid): one typed dataclass per command, each field one option with its flag, help and default. Everything
else is read from it:

- the command's parser (`add_arguments`), and so its `--config` file's keys (`npsco.cli_config`);
- the options from the parsed command line (`from_args`), from a Python call or a grid (`from_call`: typed values,
  checked), from a run's `config.json` (`PopulationOptions.from_record`);
- the command line back (`to_argv`): the report's "reproduce" command, which parses to the same options;
- the Python functions' keyword arguments (`npsco.api`), the grid's keys (`npsco.grid`) and the configuration
  (`config`: `PPOConfig`, `PopulationConfig`).

Adding an option is a field here (and a line in the docs); a population option that is a field of `PopulationConfig`
of the same name goes through to it (and back) by its name.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self, TypeVar

from npsco.compat import current_method_settings, removed_ppo_setting
from npsco.errors import NpscoError
from npsco.fields import field_types, parse_assignments, type_name, typed_value
from npsco.limits import MAX_CANDIDATES, MAX_EPISODES, MAX_POLICIES, MAX_TIMESTEPS
from npsco.methods.registry import METHODS, NOVELTY_METHODS, default_r0_scale
from npsco.ppo.config import PRESETS, PPOConfig, preset
from npsco.selection import RETURN_RATIO
from npsco.tasks import ENV_BACKENDS, MAZE_ID

if TYPE_CHECKING:  # annotations only: the population's configuration loads gymnasium
    from npsco.population_config import PopulationConfig

ENV_BACKEND_HELP = (
    "vector-env backend, the same as --set env_backend=B: auto (default), sync, async, or envpool "
    "(MuJoCo only; pip install envpool; see docs/environments.md)"
)
ENV_PACKAGE_HELP = (
    "import this module before making the task (it registers --env with Gymnasium); the run "
    "records the task as PKG:ENV_ID. --env also takes module:Class (see docs/environments.md)"
)

KINDS = ("ppo", "method", "population", "run")
"""Where an option goes: the PPO settings, a method setting of its name, the `PopulationConfig` field of its name,
or the run itself (where it is written, how many workers): not the configuration."""


def option(
    default: Any,
    help: str | None = None,
    *,
    flag: str | None = None,
    kind: str = "ppo",
    metavar: str | None = None,
    choices: tuple[str, ...] | None = None,
    cli_type: type | None = None,
    assignments: str | None = None,
    shown: bool = False,
    grid: bool = False,
    least: int = 0,
    limit: int | None = None,
) -> Any:
    """A field of an options dataclass: one command-line option.

    `flag`: its flag (default `--NAME`, _ as -); `cli_type`: the type the command line reads (`--steps 1e6` as a
    float); `assignments`: "ppo" or "method" for a `--set`/`--mset` option (KEY=VALUE texts, a dict of typed
    values); `shown`: always written by `to_argv`; `grid`: a key of a sweep's grid file, for every population of it,
    a whole number in [`least`, `limit`] where it is one."""
    assert kind in KINDS
    metadata = {
        "help": help,
        "flag": flag,
        "kind": kind,
        "metavar": metavar,
        "choices": choices,
        "cli_type": cli_type,
        "assignments": assignments,
        "shown": shown,
        "grid": grid,
        "least": least,
        "limit": limit,
    }
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=metadata)
    return field(default=default, metadata=metadata)


class CommandOptions:
    """What every command's options do: built from a parsed command line or a Python call (each value checked), and
    turned back into the command line (`from_args`, `from_call`, `to_argv` below)."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        return from_args(cls, args)

    @classmethod
    def from_call(cls, values: Mapping[str, Any]) -> Self:
        return from_call(cls, values)

    def to_argv(self) -> list[str]:
        return to_argv(self)


@dataclass
class TrainOptions(CommandOptions):
    """The options of `npsco train` and `npsco.train`."""

    env: str = option(MAZE_ID, f"Gymnasium env id (default {MAZE_ID})", shown=True)
    """Gymnasium id of the task (or `module:Class`; `PKG:ID` with `env_package`)."""
    preset: str = option("default", "hyper-parameter preset (default: default)", choices=PRESETS)
    """The PPO preset the settings start from (`npsco.ppo.config.preset`)."""
    seed: int = option(0, "seed of torch, numpy and the environments (default 0)")
    """The run's seed."""
    steps: int | None = option(None, "total environment steps (default: the preset's)", cli_type=float)
    """Total environment steps (None: the preset's)."""
    out: str | None = option(None, "run directory (default runs/train/ENV-seedS)", kind="run")
    """The run directory (None: `runs/train/TASK-seedS`; in Python, None trains in memory)."""
    settings: dict[str, Any] = option(
        {},
        "override a PPO setting, e.g. --set learning_rate=1e-3 (see docs/configuration.md)",
        flag="--set",
        metavar="KEY=VALUE",
        assignments="ppo",
    )
    """PPO settings by name (any field of `PPOConfig`), over the preset's."""
    env_package: str | None = option(None, ENV_PACKAGE_HELP, metavar="PKG")
    """A module to import before making the task (it registers `env`)."""
    env_backend: str | None = option(None, ENV_BACKEND_HELP, choices=ENV_BACKENDS)
    """The vector-env backend (None: the preset's, `auto`)."""

    def config(self) -> PPOConfig:
        """The run's PPO settings, checked (the task is made once)."""
        return ppo_config(self)


@dataclass
class PopulationOptions(CommandOptions):
    """The options of `npsco population` and `npsco.train_population`; a sweep's grid gives one per population."""

    env: str = option(MAZE_ID, f"Gymnasium env id (default {MAZE_ID})", shown=True)
    """Gymnasium id of the task (or `module:Class`; `PKG:ID` with `env_package`)."""
    method: str = option(
        "ipd", "method of the novel policies (default ipd)", kind="population", choices=tuple(METHODS), shown=True
    )
    """Method of the novel policies (`ppo`: more seeds, no novelty)."""
    refs: int | None = option(
        None,
        "number of PPO references R (default 5; paper 10); not with --refs-from or --ref-checkpoints",
        kind="population",
        grid=True,
        limit=MAX_POLICIES,
    )
    """R, the PPO references trained (None: 5); not with `refs_from` or `ref_checkpoints`."""
    novel: int = option(
        5,
        "number of novel policies K per chain (default 5; paper 10)",
        kind="population",
        grid=True,
        limit=MAX_POLICIES,
    )
    """K, the novel policies per chain."""
    candidates: int = option(
        1,
        f"candidates trained per novel policy: the first that meets the criteria (return >= {RETURN_RATIO} x the "
        "references' median, distance >= r0) is kept, else the closest; the others are recorded as dropped (default 1)",
        kind="population",
        metavar="C",
        grid=True,
        least=1,
        limit=MAX_CANDIDATES,
    )
    """C, candidates per novel slot (`npsco.selection`)."""
    candidate_episodes: int | None = option(
        None,
        "deterministic episodes on whose states a candidate's distance to the policies it avoids is measured for the "
        "criteria (default: those of its final evaluation)",
        kind="population",
        metavar="N",
        grid=True,
        least=1,
        limit=MAX_EPISODES,
    )
    """Episodes of a candidate's check against the criteria (None: its final evaluation's)."""
    workers: int = option(
        1,
        "train independent policies (references, chains, spare candidates) at the same time on a local "
        "process pool of this many workers (default 1: one after another in this process)",
        kind="run",
    )
    """Policies trained at the same time on a local process pool (1: one after another, in this process)."""
    seed: int = option(
        0,
        "base seed S: references S..S+R-1, novel policies S+1000+k (default 0; another S is an independent replicate)",
        grid=True,
    )
    """Base seed S: references S..S+R-1, novel policies S+1000+k."""
    out: str | None = option(None, "run directory (default runs/population/ENV-METHOD)", kind="run")
    """The run directory (None: `runs/population/TASK-METHOD`)."""
    refs_from: str | None = option(None, "reuse the references of an earlier run", kind="population", metavar="RUN")
    """Borrow the references of this population run."""
    ref_checkpoints: tuple[str, ...] = option(
        (),
        "use these checkpoints (or npsco train run directories) as the references",
        kind="population",
        metavar="CKPT",
    )
    """Borrow these checkpoints (or `npsco train` run directories) as the references."""
    r0: float | None = option(
        None,
        "absolute novelty threshold (default: the references' mean pairwise distance x --r0-scale)",
        kind="method",
    )
    """An absolute novelty threshold (the method setting `r0`)."""
    r0_scales: tuple[float, ...] | None = option(
        None,
        "threshold(s) as multiples of the references' mean pairwise distance; several values train "
        "one chain each (Fig. 4); default: the method's own multiple "
        f"({', '.join(f'{m} {default_r0_scale(m):g}' for m in NOVELTY_METHODS)})",
        flag="--r0-scale",
        kind="population",
        metavar="S",
    )
    """Thresholds as multiples of the default r0, one chain each (None: the method's multiple)."""
    t_start: int | None = option(
        None,
        "t_S: the constraint applies after this many steps (default 20 on MuJoCo, 3 on the maze)",
        kind="method",
    )
    """t_S (the method setting `t_start`)."""
    ipd_rule: str | None = option(
        None,
        "IPD termination rule: instant (paper, default) or cumulative (authors' code)",
        kind="method",
        choices=("instant", "cumulative"),
    )
    """IPD's termination rule (the method setting `ipd_rule`)."""
    preset: str = option("default", "hyper-parameter preset (default: default)", choices=PRESETS, grid=True)
    """The PPO preset the settings start from."""
    steps: int | None = option(
        None, "steps per policy (default: the preset's)", cli_type=float, grid=True, least=1, limit=MAX_TIMESTEPS
    )
    """Environment steps per policy (None: the preset's)."""
    settings: dict[str, Any] = option(
        {}, "override a PPO setting", flag="--set", metavar="KEY=VALUE", assignments="ppo"
    )
    """PPO settings by name (any field of `PPOConfig`), over the preset's."""
    env_package: str | None = option(None, ENV_PACKAGE_HELP, metavar="PKG")
    """A module to import before making the task (it registers `env`)."""
    env_backend: str | None = option(None, ENV_BACKEND_HELP, choices=ENV_BACKENDS)
    """The vector-env backend (None: the preset's, `auto`)."""
    method_settings: dict[str, Any] = option(
        {},
        "override a method setting (see docs/methods/), e.g. --mset wsr_weight=5",
        flag="--mset",
        kind="method",
        metavar="KEY=VALUE",
        assignments="method",
    )
    """The method's settings by name (docs/methods/), over `r0`, `t_start` and `ipd_rule`."""
    eval_episodes: int | None = option(
        None,
        "deterministic episodes of each policy's final evaluation (default 100 on the maze, 10 otherwise)",
        kind="population",
        metavar="N",
        grid=True,
        least=1,
        limit=MAX_EPISODES,
    )
    """Episodes of each policy's final evaluation (None: the task's)."""
    threshold_episodes: int | None = option(
        None,
        "deterministic episodes per reference for the default threshold (default 50 on the maze, 5 otherwise)",
        kind="population",
        metavar="N",
        grid=True,
        least=1,
        limit=MAX_EPISODES,
    )
    """Episodes per reference for the default threshold (None: the task's)."""

    def config(self) -> PopulationConfig:
        """The population's configuration, checked (the task is made once)."""
        return self.population_config(ppo_config(self))

    def population_config(self, ppo: PPOConfig) -> PopulationConfig:
        """The population's configuration with the PPO settings `ppo` (those of `ppo_config(self)`), checked: the
        method's settings from the options of kind "method" (`r0`, `t_start`, `ipd_rule`, then `method_settings`,
        later ones win), the `PopulationConfig` fields from those of kind "population" of the same name."""
        from npsco.methods.settings import MethodConfig  # lazy: a method's settings import its module
        from npsco.population_config import PopulationConfig, reference_count  # lazy: gymnasium

        method = MethodConfig(method=self.method)
        for f in options_of(type(self), "method"):
            value = getattr(self, f.name)
            if f.name == "method_settings":
                continue
            if value is not None:  # typed already: checked against the setting's type
                method = method.with_values({f.name: value}, flag_of(f))
        method = method.with_values(self.method_settings, where="method_settings:")
        values = {f.name: getattr(self, f.name) for f in options_of(type(self), "population") if f.name != "method"}
        values["refs"] = reference_count(self.refs, self.refs_from, self.ref_checkpoints)
        return PopulationConfig(ppo=ppo, method=method, **values).validate()

    @classmethod
    def from_record(cls, record: dict[str, Any], out: str | None = None) -> PopulationOptions:
        """The options that make the configuration a run recorded (its `config.json`): the preset that needs the fewest
        PPO settings, then the settings that differ from it; the method's settings that differ from its defaults;
        the population's fields as recorded (`refs` left out where the references are borrowed, `r0_scales` where
        they are the method's default)."""
        from npsco.methods.settings import MethodConfig  # lazy: a method's settings import its module

        ppo = dict(record.get("ppo") or {})
        chosen, extra = closest_preset(ppo)
        kinds = field_types(PPOConfig)
        values: dict[str, Any] = {
            "env": ppo["env_id"],
            "preset": chosen,
            "out": out,
            "seed": ppo.get("seed", 0),
            "steps": extra.pop("total_timesteps", None),
            "env_backend": extra.pop("env_backend", None),
        }
        extra.pop("seed", None)
        values["settings"] = {k: typed_value(k, v, kinds[k]) for k, v in extra.items()}
        method = dict(current_method_settings(record.get("method") or {}))
        name = str(method.get("method", "ipd"))
        values["method"] = name
        defaults = MethodConfig(method=name).to_dict() if name in METHODS else {}
        own = {k: v for k, v in method.items() if k in defaults and k != "method" and defaults[k] != v}
        named = {f.name for f in options_of(cls, "method")}
        values.update({k: v for k, v in own.items() if k in named})
        values["method_settings"] = {k: v for k, v in own.items() if k not in named}
        for f in options_of(cls, "population"):
            if f.name in record and f.name != "method":
                values[f.name] = record[f.name]
        if record.get("refs_from") or record.get("ref_checkpoints"):
            values["refs"] = None  # borrowed: as many as those
        scales = list(record.get("r0_scales") or [1.0])
        default = method.get("r0") is None and name in METHODS and scales == [default_r0_scale(name)]
        values["r0_scales"] = None if default or method.get("r0") is not None else scales
        return cls.from_call(values)


Options = TypeVar("Options", bound=CommandOptions)


# ------------------------------------------------------------------------------------------------- the fields
def options_of(cls: type, kind: str | None = None) -> list[dataclasses.Field]:
    """The fields of the options dataclass `cls` (those of `kind`, one of `KINDS`, if given)."""
    return [f for f in dataclasses.fields(cls) if kind is None or f.metadata["kind"] == kind]


def flag_of(f: dataclasses.Field) -> str:
    """The option's flag: `--NAME` with - for _, unless it names another."""
    return f.metadata["flag"] or "--" + f.name.replace("_", "-")


def dest_of(f: dataclasses.Field) -> str:
    """The option's name in the parsed command line and in a `--config` file: its flag with _ for -."""
    return flag_of(f)[2:].replace("-", "_")


def default_of(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _inner(tp: Any) -> Any:
    """`tp` without its `| None`."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if type(None) in typing.get_args(tp) and len(args) == 1 else tp


# ------------------------------------------------------------------------------------------------ the parser
def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One argument of `parser` per option of `cls`, in their order."""
    kinds = field_types(cls)
    for f in options_of(cls):
        meta, tp = f.metadata, _inner(kinds[f.name])
        kwargs: dict[str, Any] = {"help": meta["help"], "dest": dest_of(f)}
        if meta["assignments"]:
            kwargs.update(action="append", default=[], metavar=meta["metavar"])
        elif typing.get_origin(tp) is tuple:
            element = typing.get_args(tp)[0]
            default = default_of(f)
            kwargs.update(nargs="+", type=None if element is str else element, metavar=meta["metavar"])
            kwargs["default"] = None if default is None else list(default)
        else:
            kind = meta["cli_type"] or tp
            kwargs.update(type=None if kind is str else kind, default=default_of(f), metavar=meta["metavar"])
            if meta["choices"] is not None:
                kwargs["choices"] = meta["choices"]
        parser.add_argument(flag_of(f), **{k: v for k, v in kwargs.items() if v is not None or k == "default"})


def from_args(cls: type[Options], args: argparse.Namespace) -> Options:
    """The options of a parsed command line (`add_arguments`): lists as tuples, `--steps` as a whole number, the
    KEY=VALUE texts of `--set` and `--mset` as typed values (a bad one: a one-line NpscoError)."""
    kinds = field_types(cls)
    values: dict[str, Any] = {}
    for f in options_of(cls):
        value = getattr(args, dest_of(f))
        if isinstance(value, list) and not f.metadata["assignments"]:
            value = tuple(value)
        elif f.metadata["cli_type"] is not None and value is not None:
            value = _inner(kinds[f.name])(value)
        values[f.name] = value
    for f in options_of(cls):
        if f.metadata["assignments"]:
            values[f.name] = _parse_assignments(f, values[f.name], values.get("method"))
    return cls(**values)


def _parse_assignments(f: dataclasses.Field, texts: list[str], method: str | None) -> dict[str, Any]:
    if f.metadata["assignments"] == "ppo":
        for text in texts:  # a setting an earlier npsco had: say why it went, not "unknown"
            if message := removed_ppo_setting(text.partition("=")[0].strip()):
                raise NpscoError(message)
        return parse_assignments(field_types(PPOConfig), texts, flag_of(f))
    from npsco.methods.settings import MethodConfig  # lazy: a method's settings import its module

    return MethodConfig(method=str(method)).parse_settings(texts, flag_of(f))


def from_call(cls: type[Options], values: Mapping[str, Any]) -> Options:
    """The options of a Python call (or a grid, or a run's record): each value checked against its option's type
    (`npsco.fields.typed_value`: a wrong type is a one-line NpscoError); a path may be a `Path`; `None` for a dict of
    settings is none. An unknown name is an NpscoError too."""
    kinds = field_types(cls)
    unknown = sorted(set(values) - set(kinds))
    if unknown:
        raise NpscoError(f"unknown option {unknown[0]!r}; known: {', '.join(kinds)}")
    checked: dict[str, Any] = {}
    for name, value in values.items():
        tp = kinds[name]
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, (list, tuple)):
            value = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        if typing.get_origin(tp) is dict:
            if value is None:
                value = {}
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise NpscoError(f"bad value for {name}: {value!r} (expected {type_name(tp)}: setting name -> value)")
            checked[name] = dict(value)
        elif isinstance(value, str) and typing.get_origin(_inner(tp)) is tuple:
            raise NpscoError(f"bad value for {name}: {value!r} (expected {type_name(tp)}: a list)")
        else:
            checked[name] = typed_value(name, value, tp)
    return cls(**checked)


# ------------------------------------------------------------------------------------------- the command line
def to_argv(options: CommandOptions) -> list[str]:
    """The command line of `options` (after `npsco COMMAND`): each option that differs from its default (and those
    always shown), in order, those of the run (`--out`, `--workers`) last; `from_args` reads it back as the same
    options."""
    argv: list[str] = []
    for f in sorted(options_of(type(options)), key=lambda f: f.metadata["kind"] == "run"):
        value, flag = getattr(options, f.name), flag_of(f)
        if value == default_of(f) and not f.metadata["shown"]:
            continue
        if isinstance(value, dict):
            argv += [a for k, v in value.items() for a in (flag, f"{k}={setting_text(v)}")]
        elif isinstance(value, tuple):
            argv += [flag, *map(setting_text, value)]
        else:
            text = setting_text(value)
            argv += [f"{flag}={text}"] if text.startswith("-") else [flag, text]  # `--r0=-1`: not read as a flag
    return argv


def setting_text(value: Any) -> str:
    """A typed value as the command line writes it, read back as the same value (`npsco.fields.parse_value`): floats
    in full (repr), booleans as true/false, None as none, tuples comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return ",".join(map(setting_text, value))
    return str(value)


# ---------------------------------------------------------------------------------------------- configuration
def ppo_config(options: TrainOptions | PopulationOptions) -> PPOConfig:
    """The PPO settings of the options: the preset's for the task, then the seed, the steps, the backend and the
    settings (`npsco.settings.ppo_settings`), checked."""
    from npsco.settings import ppo_settings  # lazy: gymnasium

    return ppo_settings(
        options.env,
        options.preset,
        options.seed,
        options.steps,
        options.env_backend,
        env_package=options.env_package,
        values=options.settings,
    )


def closest_preset(ppo: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The preset that gives a run's PPO settings (its config.json's `ppo`) with the fewest overrides, and the
    settings that differ from it."""
    ppo = {
        **ppo,
        "actor_hidden": list(ppo.get("actor_hidden", [])),
        "critic_hidden": list(ppo.get("critic_hidden", [])),
    }

    def differing(name: str) -> dict[str, Any]:
        base = preset(ppo["env_id"], name).to_dict()
        return {k: v for k, v in ppo.items() if k in base and base[k] != v}

    diffs = {p: differing(p) for p in PRESETS}
    chosen = min(PRESETS, key=lambda p: len(diffs[p]))
    return chosen, diffs[chosen]
