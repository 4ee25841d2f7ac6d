"""Grid files of `npsco sweep` (TOML, see docs/sweep.md) and the grid of `npsco experiment`: tasks, methods, R, K,
budgets and overrides, checked and planned as population runs (`plan`), one per (task, method), before anything
trains: per task `<task>/ppo` (the R references), then one population per other method, borrowing them."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npsco.envs.make import with_package
from npsco.errors import NpscoError
from npsco.io import read_toml
from npsco.limits import (
    MAX_CHAINS,
    MAX_RUN_POLICIES,
    check_ppo_sizes,
)
from npsco.methods.registry import METHODS, NOVELTY_METHODS, default_r0_scale
from npsco.methods.settings import MethodConfig
from npsco.options import PopulationOptions, options_of, ppo_config
from npsco.population_config import PopulationConfig
from npsco.population_jobs import chains_of
from npsco.tasks import task_name

GRID_OPTIONS = tuple(f.name for f in options_of(PopulationOptions) if f.metadata["grid"])
"""The options of `npsco population` a grid file gives at its top level, for every population (`refs`, `novel`,
`seed`, `preset`, `steps`, `candidates`, the episodes counts: `npsco.options.option(grid=True)`)."""
GRID_DEFAULTS: dict[str, Any] = {"refs": 10, "novel": 10}
"""Where a grid's default differs from `npsco population`'s: the paper's R and K."""
GRID_KEYS = ("name", "tasks", "methods", *GRID_OPTIONS, "r0_scales", "ppo", "task", "method")
"""Every key a grid file may hold at its top level (docs/sweep.md describes each)."""

_PPO_FIXED = {
    "env_id": "tasks list the env ids",
    "seed": "seeds are set per policy from the grid's base `seed` S: references S..S+R-1, novel S+1000+k",
}
_METHOD_FIXED = {"method": "methods list the methods"}


def grid_options() -> PopulationOptions:
    """The options of every population of a grid that gives none."""
    return PopulationOptions.from_call(GRID_DEFAULTS)


@dataclass
class Grid:
    """A parsed, checked grid file."""

    name: str
    tasks: list[str]
    methods: list[str]
    options: PopulationOptions = field(default_factory=grid_options)
    """The options every population of the grid shares (its keys `GRID_OPTIONS`): R, K, the base seed S (references
    S..S+R-1, the k-th novel policy of every chain S+1000+k), the preset, the steps, C, the episodes counts."""
    r0_scales: list[float | str] = field(default_factory=lambda: ["default"])
    """Thresholds as multiples of r0_default; "default" is the method's own multiple
    (`npsco.methods.registry.default_r0_scale`)."""
    ppo: dict[str, Any] = field(default_factory=dict)
    task: dict[str, dict[str, Any]] = field(default_factory=dict)
    method: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The grid as a sweep records it: its keys (`GRID_KEYS`), the options at the top level."""
        out = dataclasses.asdict(self)
        shared = out.pop("options")
        return json.loads(json.dumps({**out, **{k: shared[k] for k in GRID_OPTIONS}}))

    @staticmethod
    def defaults() -> dict[str, Any]:
        """The value of every key that has a default, as `to_dict` writes it (what `settings.differences` takes: a
        sweep recorded before a key existed matches a grid with its default)."""
        return {
            k: v
            for k, v in Grid(name="", tasks=[], methods=[]).to_dict().items()
            if k not in ("name", "tasks", "methods")
        }


@dataclass
class PopulationSpec:
    """One population run of the sweep."""

    task: str
    method: str
    path: str
    """Run directory, relative to the sweep directory: `<task>/<method>`."""
    config: PopulationConfig
    refs_of: str | None = None
    """The population (path) that trains the references this one borrows; None for the task's `ppo` population."""

    @property
    def policies(self) -> int:
        return self.config.refs if self.refs_of is None else self.config.novel * len(self.chains)

    @property
    def chains(self) -> list[str]:
        """The names of the population's novel chains."""
        return [chain.name for chain in chains_of(self.config)]


# ------------------------------------------------------------------------------------------------------ grid file
def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file; every problem is a one-line NpscoError naming the file."""
    path = Path(path)
    return parse_grid(read_toml(path), path.stem, where=str(path))


def parse_grid(data: dict[str, Any], default_name: str, where: str = "grid") -> Grid:
    """Check a grid given as a dict (a parsed TOML file, or built by `npsco experiment`); `where` prefixes errors."""

    def fail(message: str) -> NpscoError:
        return NpscoError(f"{where}: {message}")

    unknown = [k for k in data if k not in GRID_KEYS]
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}; known keys: {', '.join(GRID_KEYS)}")
    for key in ("tasks", "methods"):
        value = data.get(key)
        if not value:
            raise fail(f"missing {key!r}: a list of {'env ids' if key == 'tasks' else 'methods'}")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(f"{key!r} must be a list of strings")
        if len(set(value)) != len(value):
            raise fail(f"{key!r} lists a value twice")
    for m in data["methods"]:
        if m not in METHODS:
            raise fail(f"unknown method {m!r}; choose among {', '.join(METHODS)}")
    names = [task_name(t) for t in data["tasks"]]
    if len(set(names)) != len(names):
        raise fail("two tasks have the same name without their namespace; a sweep holds one of them")
    options = _grid_options(data, fail)
    if len(data.get("r0_scales") or []) > MAX_CHAINS:
        raise fail(f"'r0_scales' lists more than npsco's limit of {MAX_CHAINS} threshold multiples")
    for key in ("ppo", "task", "method"):
        if not isinstance(data.get(key, {}), dict):
            raise fail(f"{key!r} must be a table ([{key}])")
    for env in data.get("task", {}):
        if env not in data["tasks"]:
            raise fail(f'[task."{env}"]: {env!r} is not in tasks')
        if not isinstance(data["task"][env], dict):
            raise fail(f'task."{env}" must be a table')
        task_method = data["task"][env].get("method", {})
        if not isinstance(task_method, dict):
            raise fail(f'task."{env}".method must be a table')
        for key, value in task_method.items():
            if isinstance(value, dict) and key not in data["methods"]:
                raise fail(f'[task."{env}".method.{key}]: {key!r} is not in methods')
    for key, value in data.get("method", {}).items():
        if isinstance(value, dict) and key not in data["methods"]:
            raise fail(f"[method.{key}]: {key!r} is not in methods")
    name = str(data.get("name") or default_name)
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        raise fail(f"'name' must be a plain folder name (letters, digits, _ . -), got {name!r}")
    grid = Grid(
        name=name,
        tasks=list(data["tasks"]),
        methods=list(data["methods"]),
        options=options,
        r0_scales=_scales(data.get("r0_scales", ["default"]), fail, "r0_scales"),
        ppo=dict(data.get("ppo", {})),
        task={k: _copy_table(v) for k, v in data.get("task", {}).items()},
        method={k: dict(v) if isinstance(v, dict) else v for k, v in data.get("method", {}).items()},
    )
    plan(grid, where=where)  # every population's configuration is checked here, before anything trains
    return grid


def _copy_table(table: dict[str, Any]) -> dict[str, Any]:
    """A copy of a TOML table, its sub-tables copied too (the grid keeps its own)."""
    return {k: _copy_table(v) if isinstance(v, dict) else v for k, v in table.items()}


def _grid_options(data: dict[str, Any], fail: Callable[[str], NpscoError]) -> PopulationOptions:
    """The options a grid gives every population (`GRID_OPTIONS`), each checked: a whole number in its option's range
    where it takes one, one of its choices where it has some."""
    values = dict(GRID_DEFAULTS)
    for f in options_of(PopulationOptions):
        if f.name not in GRID_OPTIONS or data.get(f.name) is None:
            continue
        value, meta = data[f.name], f.metadata
        if meta["choices"] is not None:
            if value not in meta["choices"]:
                raise fail(f"unknown {f.name} {value!r}; choose one of {', '.join(meta['choices'])}")
        elif (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not float(value).is_integer()
            or value < meta["least"]
        ):
            raise fail(f"{f.name!r} must be a whole number >= {meta['least']}, got {value!r}")
        elif meta["limit"] is not None and value > meta["limit"]:
            raise fail(f"{f.name!r} = {value:,.0f} is past npsco's limit of {meta['limit']:,} (docs/reliability.md)")
        values[f.name] = value
    try:
        return PopulationOptions.from_call(values)
    except NpscoError as e:
        raise fail(str(e)) from None


def _scales(value: Any, fail: Callable[[str], NpscoError], key: str) -> list[float | str]:
    """A grid's threshold multiples, checked: numbers > 0 or "default"."""
    if (
        not isinstance(value, list)
        or not value
        or not all(v == "default" or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0) for v in value)
    ):
        raise fail(f'{key!r} must be a non-empty list of numbers > 0 (or "default": the method\'s), got {value!r}')
    return [v if v == "default" else float(v) for v in value]


def _method_scales(value: Any, fail: Callable[[str], NpscoError], key: str, method: str) -> list[float]:
    """`_scales` for one method: "default" replaced by the method's default multiple, repeats dropped."""
    scales = _scales(value, fail, key)
    return list(dict.fromkeys(default_r0_scale(method) if v == "default" else float(v) for v in scales))


def _settings(
    table: dict[str, Any], fixed: dict[str, str], fail: Callable[[str], NpscoError], section: str
) -> dict[str, Any]:
    """The scalar settings of a TOML table, by name (values as the file types them)."""
    for key, value in table.items():
        if key in fixed:
            raise fail(f"[{section}] {key}: not a grid setting ({fixed[key]})")
        if isinstance(value, dict):
            raise fail(f"[{section}] {key}: expected a value, got a table")
    return dict(table)


def plan(grid: Grid, where: str = "grid") -> list[PopulationSpec]:
    """The population runs of a grid, references first: per task, `<task>/ppo` (the R references), then one
    population per other method, borrowing them."""

    def fail(message: str) -> NpscoError:
        return NpscoError(f"{where}: {message}")

    @contextmanager
    def checked(what: str) -> Iterator[None]:
        """An NpscoError raised inside the block, as the grid's error about `what`."""
        try:
            yield
        except NpscoError as e:
            raise fail(f"{what}: {e}") from None

    def scalars(table: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in table.items() if not isinstance(v, dict)}

    specs: list[PopulationSpec] = []
    for env in grid.tasks:
        task_table = dict(grid.task.get(env, {}))
        steps = task_table.pop("steps", grid.options.steps)
        task_method = task_table.pop("method", {})
        sets = {
            **_settings(grid.ppo, _PPO_FIXED, fail, "ppo"),
            **_settings(task_table, _PPO_FIXED, fail, f'task."{env}"'),
        }
        # the task's row: the grid's options for every population of it, as `npsco population` takes them
        row = dataclasses.replace(grid.options, env=env, settings=sets, steps=None if steps is None else int(steps))
        with checked(f"task {env!r}"):  # as `npsco population` checks it: the task made once, the env backend
            ppo = ppo_config(row)
            check_ppo_sizes(ppo.to_dict())
        refs_path = f"{task_name(env)}/ppo"
        with checked(refs_path):  # the references: no novel policy, so no candidates
            refs_config = dataclasses.replace(row, method="ppo", novel=0, candidates=1).population_config(ppo)
        specs.append(PopulationSpec(task=env, method="ppo", path=refs_path, config=refs_config))
        general_keys = set(scalars(grid.method)) | set(scalars(task_method))
        read_by_some = {"r0_scales"}
        for m in grid.methods:
            if m == "ppo":
                continue  # the references are the task's PPO policies
            # the most specific wins: [method], [method.M], [task."ENV".method], [task."ENV".method.M]; a setting of
            # the general tables applies to the methods that read it, one of a method's own table must be its own
            general = {**scalars(grid.method), **scalars(task_method)}
            own = {**grid.method.get(m, {}), **task_method.get(m, {})}
            raw_scales = own.pop("r0_scales", general.pop("r0_scales", grid.r0_scales))
            with checked(f"method {m}"):
                method = MethodConfig(method=m)
                read = {k: v for k, v in _settings(general, _METHOD_FIXED, fail, "method").items() if method.reads(k)}
                read_by_some.update(read)
                settings = {**read, **_settings(own, _METHOD_FIXED, fail, f"method.{m}")}
                method = method.with_values(settings, "setting").validate()
            # an absolute r0 replaces the default threshold: no multiple unless the grid gives one
            scales = (
                None
                if method.r0 is not None and raw_scales == ["default"]
                else tuple(_method_scales(raw_scales, fail, f"method.{m}.r0_scales", m))
            )
            with checked(f"{task_name(env)}/{m}"):
                chain = dataclasses.replace(row, method=m, method_settings=settings, r0_scales=scales)
                config = chain.population_config(ppo)
            specs.append(
                PopulationSpec(task=env, method=m, path=f"{task_name(env)}/{m}", config=config, refs_of=refs_path)
            )
        unread = sorted(general_keys - read_by_some)
        if unread:
            raise fail(f"[method] {unread[0]}: a setting of none of the grid's methods ({', '.join(grid.methods)})")
        total = sum(spec.config.trainings for spec in specs)
        if total > MAX_RUN_POLICIES:  # checked as the grid grows: a huge grid is refused before it is all planned
            raise fail(
                f"the grid trains at least {total:,} policies, past npsco's limit of {MAX_RUN_POLICIES:,} "
                "(docs/reliability.md)"
            )
    return specs


# ------------------------------------------------------------------------------------------------- npsco experiment
def experiment_grid(
    envs: Sequence[str],
    methods: Sequence[str],
    refs: int,
    novel: int,
    preset_name: str = "default",
    overrides: Sequence[str] = (),
    steps: int | None = None,
    ablation: Sequence[float] = (),
    env_package: str | None = None,
) -> Grid:
    """The grid of `npsco experiment` (docs/sweep.md): each task's PPO references, then every method's novel policies
    against them; IPD also at the `ablation` multiples of r0 (Fig. 4)."""
    methods = list(dict.fromkeys(methods))
    bad = [m for m in methods if m not in NOVELTY_METHODS]
    if bad:
        raise NpscoError(f"--methods: unknown {', '.join(bad)}; choose from {', '.join(NOVELTY_METHODS)}")
    tasks = [with_package(env, env_package) for env in dict.fromkeys(envs)]
    grid: dict[str, Any] = {
        "name": "experiment",
        "tasks": tasks,
        "methods": ["ppo", *methods],
        "refs": refs,
        "novel": novel,
        "preset": preset_name,
        "ppo": {},
    }
    for item in overrides:  # a key given twice: the later value wins, as in `npsco population`
        key, sep, value = item.partition("=")
        if not sep:
            raise NpscoError(f"--set expects key=value, got {item!r}")
        grid["ppo"][key] = value
    if steps is not None:
        grid["steps"] = steps
    if ablation:
        if "ipd" not in methods:
            raise NpscoError("--ablation varies IPD's threshold: add ipd to --methods")
        grid["method"] = {"ipd": {"r0_scales": ["default", *ablation]}}  # "default": the task's multiple
    return parse_grid(grid, "experiment", where="npsco experiment")
