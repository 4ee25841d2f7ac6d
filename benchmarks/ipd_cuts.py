"""Where IPD's constraint stops learning: its episode cuts over training, read from the training logs.

IPD ends a training episode at the first step (after t_S) where the policy is less novel than r0. For each IPD policy
of the given population runs, from its `metrics.jsonl`, at 2%, 10%, 50% and 100% of training: the share of training
episodes the constraint cut, the share cut at the first check (step t_S + 1: the policy is never novel enough to go
on), the mean episode length and return, and the mean novelty of an episode beside r0. A policy is *trapped* when
at least 95% of its last iteration's episodes end at the first check: every episode then has the same length, so the
cut no longer tells one behaviour from another and gives no signal towards novelty.

    python benchmarks/ipd_cuts.py runs/sweep/paper_campaign/Hopper-v5/ipd ... --out benchmarks/results/paper/ipd_cuts.md
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from npsco.io import read_json
from npsco.logger import read_metrics

FRACTIONS = (0.02, 0.1, 0.5, 1.0)
"""Points of training shown (shares of the logged iterations)."""
TRAPPED = 0.95
"""Share of the last iteration's episodes ended at the first check above which a policy counts as trapped."""


@dataclass(frozen=True)
class Snapshot:
    """One logged iteration of an IPD policy's training."""

    step: int
    """Environment steps so far."""
    cut: float
    """Share of the iteration's episodes that the constraint ended."""
    first_check: float
    """Share of the iteration's episodes ended at the first check (step t_S + 1)."""
    length: float
    """Mean length of the iteration's finished episodes."""
    ret: float
    """Mean return of the iteration's finished episodes."""
    novelty: float
    """Mean novelty of the iteration's episodes."""
    r0: float
    """The threshold."""


def snapshots(log: list[dict]) -> list[Snapshot]:
    """The iterations of a training log that record IPD's cuts (rows of `metrics.jsonl`), in order."""
    return [
        Snapshot(
            step=int(r["global_step"]),
            cut=float(r["ipd/terminated_frac"]),
            first_check=float(r["ipd/first_check_frac"]),
            length=float(r["charts/episodic_length"]),
            ret=float(r["charts/episodic_return"]),
            novelty=float(r["novelty/episode_mean"]),
            r0=float(r["novelty/r0"]),
        )
        for r in log
        if "ipd/terminated_frac" in r and "charts/episodic_length" in r
    ]


def at_fractions(snaps: list[Snapshot], fractions: tuple[float, ...] = FRACTIONS) -> list[Snapshot]:
    """The snapshots at the given shares of training (the last one for 1.0)."""
    if not snaps:
        raise ValueError("no IPD iterations in the log")
    return [snaps[min(len(snaps) - 1, int(f * len(snaps)))] for f in fractions]


def trapped(snaps: list[Snapshot]) -> bool:
    """Whether the policy ends training cut at the first check in (almost) every episode."""
    return bool(snaps) and snaps[-1].first_check >= TRAPPED


def policy_logs(run: Path) -> list[tuple[str, Path]]:
    """(chain/name, metrics.jsonl) of every IPD policy of a population run whose training log is there."""
    return [(f"{p.parent.parent.name}/{p.parent.name}", p) for p in sorted(run.glob("novel/*/k*/metrics.jsonl"))]


def report(runs: list[Path]) -> str:
    """The Markdown tables: per policy, the four snapshots; per chain, how many policies are trapped."""
    lines = [
        "| run | policy | training | cut | cut at first check | episode length | return | novelty / r0 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    chains: dict[str, list[bool]] = {}
    for run in runs:
        task = read_json(run / "config.json")["ppo"]["env_id"]
        for name, path in policy_logs(run):
            snaps = snapshots(read_metrics(path))
            chains.setdefault(f"{task} {name.split('/')[0]}", []).append(trapped(snaps))
            for f, s in zip(FRACTIONS, at_fractions(snaps), strict=True):
                lines.append(
                    f"| {task} | {name} | {f:.0%} | {s.cut:.2f} | {s.first_check:.2f} | {s.length:.0f} | {s.ret:.0f} | "
                    f"{s.novelty:.2f} / {s.r0:.2f} |"
                )
    summary = ["| task and chain | trapped at the end of training |", "|---|---:|"]
    summary += [f"| {chain} | {sum(flags)} of {len(flags)} |" for chain, flags in chains.items()]
    return "\n".join(summary) + "\n\n" + "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="IPD population run directories (with their training logs)")
    p.add_argument("--out", type=Path, help="write the tables here (default: print them)")
    args = p.parse_args()
    command = "python benchmarks/ipd_cuts.py " + " ".join(map(str, args.runs))
    text = (
        "# IPD's cuts over training\n\n"
        f"Made by `{command}` from the runs' training logs. A policy is trapped when at least {TRAPPED:.0%} of "
        "its last iteration's episodes end at the first check (step t_S + 1).\n\n" + report(args.runs)
    )
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
