"""`npsco experiment`: a whole study in one command: every task's PPO references and every method's novel policies
against them, trained as a sweep (`npsco.sweep`), then the report (`npsco.report`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from npsco.grid import Grid
from npsco.logger import Tracking
from npsco.manifest import population_dirs
from npsco.report.build import build_report
from npsco.sweep import Sweep, report_command, run_sweep


def run_experiment(
    grid: Grid,
    out: Path,
    workers: int | None = None,
    episodes: int | None = None,
    report: bool = True,
    log: Callable[[str], None] = print,
    tracking: Tracking | None = None,
) -> Path | None:
    """`npsco experiment`: train the experiment's grid (`npsco.grid.experiment_grid`) as a sweep in `out` on a local
    process pool, then write its report in `out/report`; returns report.md's path (None without `report`). With
    `tracking`, every policy's metrics also go to W&B."""
    sweep = Sweep(grid, out, log=log, tracking=tracking)
    log(
        f"experiment in {out}: {grid.options.refs} PPO references per task, {grid.options.novel} novel policies per "
        f"method and threshold for {', '.join(grid.methods[1:]) or 'no method'}; "
        f"{sum(s.policies for s in sweep.specs)} policies in {len(sweep.specs)} population runs"
    )
    run_sweep(sweep, "local", workers, log=log)
    runs = [str(p) for p in population_dirs(out)]
    if not report:
        log(f"trained; next: npsco report {out} --out {out / 'report'}")
        return None
    command = report_command(out) + (f" --episodes {episodes}" if episodes else "")
    path = build_report(runs, out / "report", episodes=episodes, seed=0, command=command)
    log(f"\nexperiment done; report: {path}  (HTML: {path.with_suffix('.html')})")
    return path
