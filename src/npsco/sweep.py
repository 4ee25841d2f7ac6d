"""`npsco sweep GRID`: a grid of population runs (tasks x methods x thresholds), trained in parallel.

A grid file (TOML, see docs/sweep.md; read by `npsco.grid`) names tasks, methods, R, K, budgets and overrides. The
sweep directory holds one population run directory per (task, method):

    SWEEP/sweep.json                    the grid, where each population lives, and how far it got (written atomically)
    SWEEP/<task>/ppo/                   the task's R PPO references (trained once, shared by every method of the task)
    SWEEP/<task>/<method>/              the method's K novel policies per threshold chain, borrowing the references

Independent work runs at the same time on an executor (`npsco.parallel`): the references of a population, different
populations, the threshold chains of a population. Within a chain the k-th policy still waits for the (k-1)-th.
Every policy trains from its seed in a fresh worker process, so the results do not depend on the backend or on the
number of workers. The parent process alone writes the manifests, holding the lock of the sweep folder and of every
population folder it opened (`npsco.locks`); its workers die with it (`npsco.parallel`). Re-running the same grid
resumes: finished policies are skipped.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from npsco.errors import NpscoError
from npsco.filecheck import SWEEP, read_checked
from npsco.grid import Grid, PopulationSpec, load_grid, parse_grid, plan
from npsco.io import atomic_write_json, remove_stale_temps, run_entries
from npsco.layout import SWEEP_FILE
from npsco.locks import FolderLock
from npsco.logger import Tracking, require_wandb
from npsco.parallel import Executor, Job, Scheduler, Utilisation, View, make_executor
from npsco.paths import run_folder
from npsco.population import Population
from npsco.population_jobs import PRELOAD
from npsco.seeds import novel_seed, reference_seed
from npsco.settings import differences

__all__ = [
    "Grid",
    "PopulationSpec",
    "Progress",
    "Sweep",
    "load_grid",
    "parse_grid",
    "plan",
    "run_sweep",
    "plan_lines",
    "summary_lines",
    "train_sweep",
]


# ------------------------------------------------------------------------------------------------------- the sweep
class Sweep:
    """A sweep directory: its populations, opened as their references become available, and `sweep.json`."""

    def __init__(
        self,
        grid: Grid,
        out: str | Path,
        grid_file: str | Path | None = None,
        log: Callable[[str], None] = print,
        tracking: Tracking | None = None,
    ):
        """`tracking`: every policy's metrics also go to W&B (a group per population run)."""
        if tracking is not None:
            require_wandb()
        self.grid, self.out, self.log, self.tracking = grid, Path(out), log, tracking
        self.grid_file = str(Path(grid_file).resolve()) if grid_file else None
        self.specs = plan(grid)
        self.pops: dict[str, Population] = {}  # path -> opened population
        self.status = "planned"
        self.started_at = time.monotonic()
        self.backend = ""
        self.utilisation: Utilisation | None = None
        """How busy the workers were during the last `run` that trained something (also in `sweep.json`)."""
        self._lock = FolderLock(self.out)

    @property
    def manifest_path(self) -> Path:
        return self.out / SWEEP_FILE

    def by_group(self, group: str) -> PopulationSpec:
        return next(s for s in self.specs if str((self.out / s.path).resolve()) == group)

    def open(self) -> None:
        """Create the sweep directory, or check that an existing one ran the same grid; from then on hold its lock
        (and those of the populations it opens) until `close`."""
        self._check_folder()  # before the lock: a refusal leaves the folder as it was
        self._lock.acquire()  # fails at once, naming the holder, if another process writes this sweep
        try:
            self._check_folder()
            remove_stale_temps(self.out)
            self.utilisation = self._recorded_utilisation()
            for spec in self.specs:
                self._population(spec)
            self.save()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the locks of the sweep folder and of its populations."""
        for pop in self.pops.values():
            pop.close()
        self._lock.release()

    def _recorded_utilisation(self) -> Utilisation | None:
        """The utilisation `sweep.json` recorded for the last run that trained something (None: none yet)."""
        if not self.manifest_path.exists():
            return None
        use = read_checked(self.manifest_path, SWEEP).get("utilisation")
        return None if use is None else Utilisation(use["workers"], use["wall_seconds"], use["busy_seconds"])

    def _check_folder(self) -> None:
        """Refuse a folder that is not a sweep directory, or one that ran another grid (reads only)."""
        run_folder(self.out)  # before anything there is read: no symbolic link below it (npsco.paths)
        if self.manifest_path.exists():
            old = read_checked(self.manifest_path, SWEEP).get("grid") or {}
            changed = differences(old, self.grid.to_dict(), Grid.defaults())
            if changed:
                raise NpscoError(
                    f"{self.out} holds a sweep of another grid ({'; '.join(changed)}); use another --out (or the "
                    f"same grid)"
                )
        elif self.out.exists() and run_entries(self.out):
            raise NpscoError(f"{self.out} exists and is not a sweep directory; choose another --out")

    def _population(self, spec: PopulationSpec) -> Population | None:
        """The opened population of `spec`, opening it if it can be (its references are trained); else None."""
        if spec.path in self.pops:
            return self.pops[spec.path]
        if spec.refs_of is not None:
            refs = self.pops.get(spec.refs_of)
            if refs is None or any(m.status != "done" for m in refs.members if m.role == "reference"):
                return None
            spec.config = dataclasses.replace(spec.config, refs_from=str((self.out / spec.refs_of).resolve()))

        sweep = weakref.ref(self)  # (not `self`: a cycle would keep a dropped sweep, and its lock, alive)

        def warnings_only(line: str, path: str = spec.path) -> None:  # the progress view says the rest
            owner = sweep()
            if owner is not None and line.startswith("warning"):
                owner.log(f"{path}: {line}")

        pop = Population(self.out / spec.path, spec.config, progress=False, log=warnings_only, tracking=self.tracking)
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
        return [
            m.final_eval["return_mean"]
            for m in (pop.members if pop else [])
            if m.final_eval and (spec.refs_of is None or m.role == "novel")
        ]

    def save(self) -> None:
        rows = []
        for spec in self.specs:
            done, total = self.counts(spec)
            pop, returns = self.pops.get(spec.path), self.final_returns(spec)
            rows.append(
                {
                    "task": spec.task,
                    "method": spec.method,
                    "path": spec.path,
                    "references_from": spec.refs_of,
                    "chains": spec.chains if spec.refs_of else [],
                    "policies": total,
                    "done": done,
                    "status": "done" if total and done == total else "waiting" if pop is None else "open",
                    "r0_default": pop.r0_default if pop else None,
                    "return_mean": round(sum(returns) / len(returns), 6) if returns else None,
                }
            )
        atomic_write_json(
            self.manifest_path,
            {
                "format": "npsco-sweep",
                "format_version": 1,
                "name": self.grid.name,
                "grid_file": self.grid_file,
                "grid": self.grid.to_dict(),
                "backend": self.backend,
                "status": self.status,
                "wall_seconds": round(time.monotonic() - self.started_at, 1),
                "utilisation": self.utilisation.to_dict() if self.utilisation else None,
                "populations": rows,
            },
        )

    # ---------------------------------------------------------------------------------- npsco.parallel.Source
    def waiting_on(self, spec: PopulationSpec) -> int:
        """Environment steps of the longest chain of the populations not yet opened that borrow `spec`'s references
        (they start once those are trained)."""
        return max(
            (
                s.config.novel * s.config.ppo.policy_steps
                for s in self.specs
                if s.refs_of == spec.path and s.path not in self.pops
            ),
            default=0,
        )

    def ready(self, busy: set[str]) -> list[Job]:
        """Every opened population's ready jobs; a reference's `after` also counts the chains waiting for it, so the
        scheduler starts the work on the sweep's critical path first."""
        jobs = []
        for spec in self.specs:
            pop = self._population(spec)
            if pop is None:
                continue
            waiting = self.waiting_on(spec) if spec.refs_of is None else 0
            jobs += [dataclasses.replace(job, after=max(job.after, waiting)) for job in pop.ready(busy)]
        return jobs

    def started(self, job: Job) -> None:
        self.pops[self.by_group(job.group).path].started(job)

    def finished(self, job: Job, result: Any) -> str:
        detail = self.pops[self.by_group(job.group).path].finished(job, result)
        self.save()
        return detail

    # ----------------------------------------------------------------------------------------------------- run
    def run(self, executor: Executor, view: View | None = None) -> None:
        """Train everything not yet trained on `executor`; `sweep.json` records the outcome (`interrupted` after
        Ctrl-C or SIGTERM, which the command turns into KeyboardInterrupt)."""
        if not self._lock.held:
            self.open()
        try:
            self.backend = executor.describe()
            self.status = "running"
            self.save()
            scheduler = Scheduler(executor)
            try:
                scheduler.run(self, view)
            except KeyboardInterrupt:
                self.status = "interrupted"
                raise
            except BaseException:
                self.status = "failed"
                raise
            else:
                self.status = "done"
            finally:
                use = scheduler.utilisation
                if use is not None and use.busy_seconds > 0:  # a re-run that trained nothing keeps the last record
                    self.utilisation = use
                    self.log(f"{self.out}: {use.describe()}")
                self.save()
        finally:
            self.close()


# -------------------------------------------------------------------------------------------------------- progress
class Progress:
    """The live view of a sweep: on a terminal, a table (done / running / waiting per population, overall steps/s)
    redrawn in place below a scrolling log of finished policies; otherwise one line per event, for log files."""

    def __init__(self, sweep: Sweep, stream: TextIO | None = None, live: bool | None = None):
        self.sweep, self.stream = sweep, stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.running: dict[str, set[str]] = {}
        self.steps = 0
        self.start = time.monotonic()
        self.first_start: float | None = None
        self.drawn = 0
        self.last_draw = 0.0

    def _label(self, job: Job) -> str:
        return f"{self.sweep.by_group(job.group).path} {job.label}"

    def rate(self) -> str:
        """Environment steps of the policies finished so far, per second since the first job started."""
        if self.first_start is None:
            return "0 steps/s"
        return f"{self.steps / max(time.monotonic() - self.first_start, 1e-9):,.0f} steps/s"

    def totals(self) -> tuple[int, int, int]:
        done = total = 0
        for spec in self.sweep.specs:
            d, t = self.sweep.counts(spec)
            done, total = done + d, total + t
        return done, total, sum(len(v - {"threshold"}) for v in self.running.values())

    def event(self, kind: str, job: Job, detail: str = "") -> None:
        group = self.running.setdefault(job.group, set())
        if kind == "start":
            group.add(job.label)
            self.first_start = self.first_start or time.monotonic()
        else:
            group.discard(job.label)
        if kind == "done":
            self.steps += job.steps
        done, total, running = self.totals()
        line = (
            f"[{_clock(time.monotonic() - self.start)}] {kind:>5s} {self._label(job)}"
            + (f": {detail}" if detail else "")
            + f"  ({done}/{total} policies done, {running} running, {self.rate()})"
        )
        if not self.live:
            print(line, file=self.stream, flush=True)
            return
        if kind != "start":
            self._clear()
            print(line, file=self.stream)
        self._draw()

    def note(self, line: str) -> None:
        """A line for the log above the table (a population's warning, the utilisation at the end)."""
        self._clear()
        print(line, file=self.stream, flush=True)
        if self.live:
            self._draw()

    def tick(self) -> None:
        if self.live and time.monotonic() - self.last_draw >= 1.0:
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
        self.drawn, self.last_draw = len(lines), time.monotonic()

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
            lines.append(
                f"{spec.path:<{width}s}  {done:>4d}/{total:<4d}  {n_run:>7d}  {total - done - n_run:>7d}{note}"
            )
        done, total, n_run = self.totals()
        lines.append(
            f"{'all':<{width}s}  {done:>4d}/{total:<4d}  {n_run:>7d}  "
            f"{total - done - n_run:>7d}  {_clock(time.monotonic() - self.start)}, {self.rate()}"
        )
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


def plan_lines(sweep: Sweep) -> list[str]:
    """`npsco sweep --dry-run`: one line per population run, what it trains and with which seeds."""
    lines = []
    for s in sweep.specs:
        base = s.config.ppo.seed
        first, last = (
            (reference_seed(base, 0), reference_seed(base, s.config.refs - 1))
            if s.refs_of is None
            else (novel_seed(base, 0), novel_seed(base, s.config.novel - 1))
        )
        seeds = f"seeds {first}..{last}"
        what = (
            f"{s.config.refs} PPO references ({seeds})"
            if s.refs_of is None
            else f"{s.config.novel} x {', '.join(s.chains)} ({seeds}; references of {s.refs_of})"
        )
        lines.append(f"  {s.path}: {what}, {s.config.ppo.total_timesteps:,} steps each")
    return lines


def run_sweep(
    sweep: Sweep,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    log: Callable[[str], None] = print,
) -> None:
    """Train a sweep on a new executor (`npsco.parallel.make_executor`) with the live `Progress` view; whatever the
    outcome, one line per population (`summary_lines`) follows. The sweep folder is opened (and locked) before any
    worker starts."""
    sweep.open()
    try:
        with make_executor(backend, workers, address, preload=PRELOAD) as executor:
            log(f"backend: {executor.describe()}")
            progress = Progress(sweep)
            sweep.log = progress.note  # a population's warning, above the live table
            try:
                sweep.run(executor, progress)
            finally:
                sweep.log = log
    finally:
        sweep.close()
        if sweep.pops:
            log("\n".join(summary_lines(sweep)))


def report_command(out: str | Path) -> str:
    """The `npsco report` command of a sweep folder (it stands for its population runs)."""
    return f"npsco report {shlex.quote(str(out))} --out {shlex.quote(str(Path(out) / 'report'))}"


def train_sweep(
    grid_file: str | Path,
    out: str | Path | None = None,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    dry_run: bool = False,
    log: Callable[[str], None] = print,
    tracking: Tracking | None = None,
) -> Sweep:
    """`npsco sweep GRID`: train the grid file's population runs in `out` (default `runs/sweep/NAME`), or with
    `dry_run` only check the grid and log the plan. With `tracking`, every policy's metrics also go to W&B."""
    grid = load_grid(grid_file)
    out = Path(out or f"runs/sweep/{grid.name}")
    sweep = Sweep(grid, out, grid_file=grid_file, log=log, tracking=tracking)
    log(
        f"sweep {grid.name!r} in {out}: {len(grid.tasks)} task(s) x {len(grid.methods)} method(s), "
        f"{len(sweep.specs)} population runs, {sum(s.policies for s in sweep.specs)} policies"
    )
    if dry_run:
        log("\n".join(plan_lines(sweep)))
        return sweep
    try:
        run_sweep(sweep, backend, workers, address, log=log)
    finally:
        if sweep.pops:
            log(f"sweep manifest: {out / SWEEP_FILE}")
    log(f"next: {report_command(out)}   (a sweep folder stands for its population runs)")
    return sweep
