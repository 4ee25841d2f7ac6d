"""What bound during training: per novel policy of the population runs under RUNS, the Lagrangian's multipliers and
the rollout return over its last 20 iterations, from each policy's `metrics.jsonl` (kept in the training checkout;
the committed copies leave the logs out), beside 0.9 x the references' median final return.

    python benchmarks/good_and_different/multipliers.py RUNS --out multipliers.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from npsco.io import atomic_write_text
from npsco.logger import read_metrics

LAST = 20
"""Iterations averaged at the end of training."""


def summary(run: Path) -> list[dict]:
    """Per novel member of the population run `run`: its name and, over its last `LAST` iterations, the mean novelty
    weight, action-multiplier sum and rollout return; the largest return multiplier of its training; the references'
    median final return."""
    manifest = json.loads((run / "manifest.json").read_text())
    refs = [m["final_eval"]["return_mean"] for m in manifest["members"] if m["role"] == "reference"]
    best = statistics.median(refs)
    out = []
    for m in manifest["members"]:
        path = run / m["path"] / "metrics.jsonl"
        if m["role"] != "novel" or not path.exists():
            continue
        rows = read_metrics(path)
        last = rows[-LAST:]

        def mean(key: str, rows: list[dict] = last) -> float | None:
            values = [r[key] for r in rows if r.get(key) is not None]
            return statistics.mean(values) if values else None

        out.append(
            {
                "task": manifest["env_id"],
                "run": run.name,
                "name": m["name"],
                "novelty_weight": mean("lagrangian/novelty_weight"),
                "lambda_sum": mean("lagrangian/lambda_sum"),
                "return_multiplier_max": max((r.get("lagrangian/return_multiplier") or 0.0) for r in rows),
                "rollout_return": mean("charts/episodic_return"),
                "reference_median": best,
            }
        )
    return out


def table(rows: list[dict]) -> str:
    def cell(v: float | None, digits: int) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    lines = [
        "| task | run | policy | novelty weight (last 20) | lambda sum (last 20) | largest nu "
        "| rollout return (last 20) | / (0.9 x references' median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = None if r["rollout_return"] is None else r["rollout_return"] / (0.9 * r["reference_median"])
        lines.append(
            f"| {r['task']} | {r['run']} | {r['name']} | {cell(r['novelty_weight'], 3)} | {cell(r['lambda_sum'], 2)} "
            f"| {r['return_multiplier_max']:.1f} | {cell(r['rollout_return'], 0)} | {cell(ratio, 2)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="a folder holding population runs (searched for manifest.json)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    rows = [r for m in sorted(args.runs.rglob("manifest.json")) for r in summary(m.parent)]
    command = f"python benchmarks/good_and_different/multipliers.py {args.runs} --out {args.out}"
    atomic_write_text(
        args.out, f"# What bound during training\n\nMade by `{command}`.\n\n{__doc__.splitlines()[0]}\n\n" + table(rows)
    )
    print(f"{len(rows)} policies: {args.out}")


if __name__ == "__main__":
    main()
