"""`npsco sweep GRID`: a grid of population runs (tasks x methods x thresholds), trained in parallel.

A grid file (TOML, see docs/sweep.md) names tasks, methods, R, K, budgets and overrides. The sweep directory holds one
population run directory per (task, method):

    SWEEP/sweep.json                    the grid, where each population lives, and how far it got (written atomically)
    SWEEP/<task>/ppo/                   the task's R PPO references (trained once, shared by every method of the task)
    SWEEP/<task>/<method>/              the method's K novel policies per threshold chain, borrowing the references

Independent work runs at the same time on an executor (`npsco.parallel`): the references of a population, different
populations, the threshold chains of a population. Within a chain the k-th policy still waits for the (k-1)-th.
Every policy trains from its seed in a fresh worker process, so the results do not depend on the backend or on the
number of workers. The parent process alone writes the manifests. Re-running the same grid resumes: finished policies
are skipped.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from npsco.config import METHODS, PRESETS, MethodConfig, PPOConfig, apply_overrides, default_r0_scale, preset
from npsco.errors import NpscoError
from npsco.tasks import task_name  # the folder of a task in a sweep: its short name
from npsco.io import atomic_write_json, read_json
from npsco.population import Population, PopulationConfig

GRID_KEYS = ("name", "tasks", "methods", "refs", "novel", "seed", "preset", "steps", "r0_scales", "eval_episodes",
             "threshold_episodes", "ppo", "task", "method")
"""Every key a grid file may hold at its top level (docs/sweep.md describes each)."""

_PPO_FIXED = {"env_id": "tasks list the env ids",
              "seed": "seeds are set per policy from the grid's base `seed` S: references S..S+R-1, novel S+1000+k"}
_METHOD_FIXED = {"method": "methods list the methods"}


@dataclass
class Grid:
    """A parsed, checked grid file."""

    name: str
    tasks: list[str]
    methods: list[str]
    refs: int = 10
    novel: int = 10
    seed: int = 0
    """Base seed S, as `npsco population --seed`: the references train with seeds S..S+R-1, the k-th novel policy of
    every chain with S+1000+k."""
    preset: str = "default"
    steps: int | None = None
    r0_scales: list[float | str] = field(default_factory=lambda: ["default"])
    """Thresholds as multiples of r0_default; "default" is the task's own multiple (`npsco.config.default_r0_scale`)."""
    eval_episodes: int | None = None
    threshold_episodes: int | None = None
    ppo: dict[str, Any] = field(default_factory=dict)
    task: dict[str, dict[str, Any]] = field(default_factory=dict)
    method: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))


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
        return Population(self.path, self.config, progress=False).chains()  # no I/O: only the names


# ------------------------------------------------------------------------------------------------------ grid file
def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file; every problem is a one-line NpscoError naming the file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NpscoError(f"{path}: file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise NpscoError(f"{path}: not valid TOML ({e})") from None
    return parse_grid(data, path.stem, where=str(path))


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
    for key in ("refs", "novel", "seed", "steps", "eval_episodes", "threshold_episodes"):
        value, least = data.get(key), 0 if key in ("refs", "novel", "seed") else 1
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not float(value).is_integer() or value < least):
            raise fail(f"{key!r} must be a whole number >= {least}, got {value!r}")
    if data.get("preset", "default") not in PRESETS:
        raise fail(f"unknown preset {data['preset']!r}; choose one of {', '.join(PRESETS)}")
    for key in ("ppo", "task", "method"):
        if not isinstance(data.get(key, {}), dict):
            raise fail(f"{key!r} must be a table ([{key}])")
    for env in data.get("task", {}):
        if env not in data["tasks"]:
            raise fail(f"[task.\"{env}\"]: {env!r} is not in tasks")
        if not isinstance(data["task"][env], dict):
            raise fail(f"task.\"{env}\" must be a table")
        task_method = data["task"][env].get("method", {})
        if not isinstance(task_method, dict):
            raise fail(f"task.\"{env}\".method must be a table")
        for key, value in task_method.items():
            if isinstance(value, dict) and key not in data["methods"]:
                raise fail(f"[task.\"{env}\".method.{key}]: {key!r} is not in methods")
    for key, value in data.get("method", {}).items():
        if isinstance(value, dict) and key not in data["methods"]:
            raise fail(f"[method.{key}]: {key!r} is not in methods")
    name = str(data.get("name") or default_name)
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        raise fail(f"'name' must be a plain folder name (letters, digits, _ . -), got {name!r}")
    grid = Grid(name=name, tasks=list(data["tasks"]), methods=list(data["methods"]),
                refs=int(data.get("refs", 10)), novel=int(data.get("novel", 10)), seed=int(data.get("seed", 0)),
                preset=data.get("preset", "default"),
                steps=int(data["steps"]) if data.get("steps") is not None else None,
                r0_scales=_scales(data.get("r0_scales", ["default"]), fail, "r0_scales"),
                eval_episodes=_int_or_none(data.get("eval_episodes")),
                threshold_episodes=_int_or_none(data.get("threshold_episodes")),
                ppo=dict(data.get("ppo", {})), task={k: _copy_table(v) for k, v in data.get("task", {}).items()},
                method={k: dict(v) if isinstance(v, dict) else v for k, v in data.get("method", {}).items()})
    plan(grid, where=where)  # every population's configuration is checked here, before anything trains
    return grid


def _copy_table(table: dict[str, Any]) -> dict[str, Any]:
    """A copy of a TOML table, its sub-tables copied too (the grid keeps its own)."""
    return {k: _copy_table(v) if isinstance(v, dict) else v for k, v in table.items()}


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _scales(value: Any, fail: Callable[[str], NpscoError], key: str, env: str | None = None) -> list[float | str]:
    """A grid's threshold multiples, checked; with `env`, "default" replaced by that task's default multiple."""
    if not isinstance(value, list) or not value or not all(
            v == "default" or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0) for v in value):
        raise fail(f"{key!r} must be a non-empty list of numbers > 0 (or \"default\": the task's), got {value!r}")
    if env is None:
        return [v if v == "default" else float(v) for v in value]
    return list(dict.fromkeys(default_r0_scale(env) if v == "default" else float(v) for v in value))


def _settings(table: dict[str, Any], fixed: dict[str, str], fail: Callable[[str], NpscoError],
              section: str) -> list[str]:
    """`key=value` strings (as `--set` takes them) from a TOML table of scalar settings."""
    out = []
    for key, value in table.items():
        if key in fixed:
            raise fail(f"[{section}] {key}: not a grid setting ({fixed[key]})")
        if isinstance(value, dict):
            raise fail(f"[{section}] {key}: expected a value, got a table")
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        out.append(f"{key}={value}")
    return out


def plan(grid: Grid, where: str = "grid") -> list[PopulationSpec]:
    """The population runs of a grid, references first: per task, `<task>/ppo` (the R references), then one
    population per other method, borrowing them."""
    from npsco.envs.make import check_env_id

    def fail(message: str) -> NpscoError:
        return NpscoError(f"{where}: {message}")

    def checked(what: str, build: Callable[[], Any]) -> Any:
        try:
            return build()
        except NpscoError as e:
            raise fail(f"{what}: {e}") from None

    def scalars(table: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in table.items() if not isinstance(v, dict)}

    specs: list[PopulationSpec] = []
    for env in grid.tasks:
        checked(f"task {env!r}", lambda: check_env_id(env))
        task_table = dict(grid.task.get(env, {}))
        steps = task_table.pop("steps", grid.steps)
        task_method = task_table.pop("method", {})
        sets = [f"seed={grid.seed}"] + ([f"total_timesteps={int(steps)}"] if steps is not None else [])
        sets += _settings(grid.ppo, _PPO_FIXED, fail, "ppo")
        sets += _settings(task_table, _PPO_FIXED, fail, f'task."{env}"')
        ppo: PPOConfig = checked(f"task {env!r}", lambda: apply_overrides(preset(env, grid.preset), sets).validate())
        refs_path = f"{task_name(env)}/ppo"
        refs_config = PopulationConfig(ppo=ppo, method=MethodConfig(method="ppo"), refs=grid.refs, novel=0,
                                       eval_episodes=grid.eval_episodes, threshold_episodes=grid.threshold_episodes)
        specs.append(PopulationSpec(task=env, method="ppo", path=refs_path, config=checked(refs_path, refs_config.validate)))
        for m in grid.methods:
            if m == "ppo":
                continue  # the references are the task's PPO policies
            # the most specific wins: [method], [method.M], [task."ENV".method], [task."ENV".method.M]
            table = {**scalars(grid.method), **grid.method.get(m, {}), **scalars(task_method), **task_method.get(m, {})}
            raw_scales = table.pop("r0_scales", grid.r0_scales)
            method = checked(f"method {m}", lambda: apply_overrides(
                MethodConfig(method=m), _settings(table, _METHOD_FIXED, fail, f"method.{m}")).validate())
            # an absolute r0 replaces the default threshold: no multiple unless the grid gives one
            scales = (None if method.r0 is not None and raw_scales == ["default"] else
                      tuple(_scales(raw_scales, fail, f"method.{m}.r0_scales", env)))
            config = PopulationConfig(ppo=ppo, method=method, refs=grid.refs, novel=grid.novel, r0_scales=scales,
                                      eval_episodes=grid.eval_episodes, threshold_episodes=grid.threshold_episodes)
            checked(f"{task_name(env)}/{m}", config.validate)
            specs.append(PopulationSpec(task=env, method=m, path=f"{task_name(env)}/{m}", config=config, refs_of=refs_path))
    return specs


# ------------------------------------------------------------------------------------------------------- the sweep
class Sweep:
    """A sweep directory: its populations, opened as their references become available, and `sweep.json`."""

    def __init__(self, grid: Grid, out: str | Path, grid_file: str | Path | None = None,
                 log: Callable[[str], None] = print):
        self.grid, self.out, self.log = grid, Path(out), log
        self.grid_file = str(Path(grid_file).resolve()) if grid_file else None
        self.specs = plan(grid)
        self.pops: dict[str, Population] = {}  # path -> opened population
        self.status = "planned"
        self.started_at = time.time()
        self.backend = ""

    @property
    def manifest_path(self) -> Path:
        return self.out / "sweep.json"

    def by_group(self, group: str) -> PopulationSpec:
        return next(s for s in self.specs if str((self.out / s.path).resolve()) == group)

    def open(self) -> None:
        """Create the sweep directory, or check that an existing one ran the same grid."""
        if self.manifest_path.exists():
            old = read_json(self.manifest_path)
            if {"seed": 0, **(old.get("grid") or {})} != self.grid.to_dict():  # grids before the `seed` key: 0
                raise NpscoError(f"{self.out} holds a sweep of another grid; use another --out (or the same grid)")
        elif self.out.exists() and any(self.out.iterdir()):
            raise NpscoError(f"{self.out} exists and is not a sweep directory; choose another --out")
        self.out.mkdir(parents=True, exist_ok=True)
        for spec in self.specs:
            self._population(spec)
        self.save()

    def _population(self, spec: PopulationSpec) -> Population | None:
        """The opened population of `spec`, opening it if it can be (its references are trained); else None."""
        if spec.path in self.pops:
            return self.pops[spec.path]
        if spec.refs_of is not None:
            refs = self.pops.get(spec.refs_of)
            if refs is None or any(m.status != "done" for m in refs.members if m.role == "reference"):
                return None
            spec.config = dataclasses.replace(spec.config, refs_from=str((self.out / spec.refs_of).resolve()))
        pop = Population(self.out / spec.path, spec.config, progress=False, log=lambda line: None)
        pop.open()
        self.pops[spec.path] = pop
        return pop

    def counts(self, spec: PopulationSpec) -> tuple[int, int]:
        """(done, total) policies trained by this population (borrowed references are not counted)."""
        pop = self.pops.get(spec.path)
        if pop is None:
            return 0, spec.policies
        own = [m for m in pop.members if spec.refs_of is None or m.role == "novel"]
        return sum(m.status == "done" for m in own), len(own)

    def final_returns(self, spec: PopulationSpec) -> list[float]:
        """Final evaluated returns of the policies this population trains itself (a method run's novel ones)."""
        pop = self.pops.get(spec.path)
        return [m.final_eval["return_mean"] for m in (pop.members if pop else [])
                if m.final_eval and (spec.refs_of is None or m.role == "novel")]

    def save(self) -> None:
        rows = []
        for spec in self.specs:
            done, total = self.counts(spec)
            pop, returns = self.pops.get(spec.path), self.final_returns(spec)
            rows.append({"task": spec.task, "method": spec.method, "path": spec.path, "references_from": spec.refs_of,
                         "chains": spec.chains if spec.refs_of else [], "policies": total, "done": done,
                         "status": "done" if total and done == total else "waiting" if pop is None else "open",
                         "r0_default": pop.r0_default if pop else None,
                         "return_mean": round(sum(returns) / len(returns), 6) if returns else None})
        atomic_write_json(self.manifest_path, {
            "format": "npsco-sweep", "format_version": 1, "name": self.grid.name, "grid_file": self.grid_file,
            "grid": self.grid.to_dict(), "backend": self.backend, "status": self.status,
            "wall_seconds": round(time.time() - self.started_at, 1), "populations": rows})

    # ---------------------------------------------------------------------------------- npsco.parallel.Source
    def ready(self, busy: set[str]) -> list:
        jobs = []
        for spec in self.specs:  # references first: they unblock the most work
            pop = self._population(spec)
            if pop is not None:
                jobs += pop.ready(busy)
        return jobs

    def started(self, job) -> None:
        self.pops[self.by_group(job.group).path].started(job)

    def finished(self, job, result) -> str:
        detail = self.pops[self.by_group(job.group).path].finished(job, result)
        self.save()
        return detail

    # ----------------------------------------------------------------------------------------------------- run
    def run(self, executor, view=None) -> None:
        """Train everything not yet trained on `executor`; `sweep.json` records the outcome."""
        from npsco.parallel import Scheduler

        self.open()
        self.backend = executor.describe()
        self.status = "running"
        self.save()
        try:
            Scheduler(executor).run(self, view)
        except KeyboardInterrupt:
            self.status = "interrupted"
            raise
        except BaseException:
            self.status = "failed"
            raise
        else:
            self.status = "done"
        finally:
            self.save()


def population_dirs(path: str | Path) -> list[Path]:
    """The population run directories under `path`: those of a sweep directory (`sweep.json`, in grid order, the
    ones that exist), or `path` itself when it is a population run directory. For `npsco report SWEEP_DIR`."""
    path = Path(path)
    if (path / "sweep.json").exists():
        rows = read_json(path / "sweep.json").get("populations", [])
        return [path / r["path"] for r in rows if (path / r["path"] / "manifest.json").exists()]
    if (path / "manifest.json").exists():
        return [path]
    raise NpscoError(f"{path}: neither a sweep directory (sweep.json) nor a population run directory (manifest.json)")


# -------------------------------------------------------------------------------------------------------- progress
class Progress:
    """The live view of a sweep: on a terminal, a table (done / running / waiting per population, overall steps/s)
    redrawn in place below a scrolling log of finished policies; otherwise one line per event, for log files."""

    def __init__(self, sweep: Sweep, stream: TextIO | None = None, live: bool | None = None):
        self.sweep, self.stream = sweep, stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.running: dict[str, set[str]] = {}
        self.steps = 0
        self.start = time.time()
        self.first_start: float | None = None
        self.drawn = 0
        self.last_draw = 0.0

    def _label(self, job) -> str:
        return f"{self.sweep.by_group(job.group).path} {job.label}"

    def rate(self) -> str:
        """Environment steps of the policies finished so far, per second since the first job started."""
        if self.first_start is None:
            return "0 steps/s"
        return f"{self.steps / max(time.time() - self.first_start, 1e-9):,.0f} steps/s"

    def totals(self) -> tuple[int, int, int]:
        done = total = 0
        for spec in self.sweep.specs:
            d, t = self.sweep.counts(spec)
            done, total = done + d, total + t
        return done, total, sum(len(v - {"threshold"}) for v in self.running.values())

    def event(self, kind: str, job, detail: str = "") -> None:
        group = self.running.setdefault(job.group, set())
        if kind == "start":
            group.add(job.label)
            self.first_start = self.first_start or time.time()
        else:
            group.discard(job.label)
        if kind == "done":
            self.steps += job.steps
        done, total, running = self.totals()
        line = (f"[{_clock(time.time() - self.start)}] {kind:>5s} {self._label(job)}" + (f": {detail}" if detail else "")
                + f"  ({done}/{total} policies done, {running} running, {self.rate()})")
        if not self.live:
            print(line, file=self.stream, flush=True)
            return
        if kind != "start":
            self._clear()
            print(line, file=self.stream)
        self._draw()

    def tick(self) -> None:
        if self.live and time.time() - self.last_draw >= 1.0:
            self._draw()

    def _clear(self) -> None:
        if self.drawn:
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0

    def _draw(self) -> None:
        self._clear()
        lines = self.table()
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()
        self.drawn, self.last_draw = len(lines), time.time()

    def table(self) -> list[str]:
        width = max(len(s.path) for s in self.sweep.specs)
        lines = [f"{'population':<{width}s}  {'done':>9s}  {'running':>7s}  {'waiting':>7s}"]
        for spec in self.sweep.specs:
            done, total = self.sweep.counts(spec)
            running = self.running.get(str((self.sweep.out / spec.path).resolve()), set())
            n_run = len(running - {"threshold"})
            note = "  (threshold)" if "threshold" in running else ""
            if spec.path not in self.sweep.pops:
                note = "  (waits for its references)"
            lines.append(f"{spec.path:<{width}s}  {done:>4d}/{total:<4d}  {n_run:>7d}  {total - done - n_run:>7d}{note}")
        done, total, running = self.totals()
        lines.append(f"{'all':<{width}s}  {done:>4d}/{total:<4d}  {running:>7d}  "
                     f"{total - done - running:>7d}  {_clock(time.time() - self.start)}, {self.rate()}")
        return lines


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def summary_lines(sweep: Sweep) -> list[str]:
    """One line per population: policies done and their mean final return."""
    width = max(len(s.path) for s in sweep.specs)
    lines = []
    for spec in sweep.specs:
        done, total = sweep.counts(spec)
        pop, returns = sweep.pops.get(spec.path), sweep.final_returns(spec)
        line = f"{spec.path:<{width}s}  {done}/{total} policies"
        if returns:
            mean = sum(returns) / len(returns)
            std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
            line += f"   final return {mean:8.2f} +- {std:.2f} (over policies)"
        if pop is not None and pop.r0_default is not None:
            line += f"   r0 {pop.r0_default:.4g}"
        lines.append(line)
    return lines
