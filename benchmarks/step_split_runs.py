"""Several `step_split.py` runs of the same code side by side: each run's own cost per task, and their median.

    python benchmarks/step_split_runs.py step_split_final_1.json step_split_final_2.json step_split_final_3.json \
        --goal 40 --out benchmarks/results/throughput/step_split_final

The runs are records in benchmarks/results/throughput (as `step_split.py --out` writes them), made at different times:
this shared machine's speed moves by a third within minutes, so runs spread over hours sample that drift. Per task:
each run's own cost (the median over its repeats) and whether it is within `--goal` us, and the median over the runs
with its verdict.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from step_split import own_cost  # noqa: E402  (the sibling script whose records these are)

RESULTS = Path(__file__).resolve().parent / "results/throughput"


def run_own_costs(record: dict) -> dict[str, float]:
    """Per task, a run's own cost: the median over its repeats (one value for a run without repeats)."""
    return {task: statistics.median(own_cost(row) for row in rows) for task, rows in record["runs"].items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="step_split records in benchmarks/results/throughput, in time order")
    ap.add_argument("--goal", type=float, default=40.0, help="the own cost's goal in us (default 40)")
    ap.add_argument("--out", type=Path, required=True, help="results path without suffix (.md and .json)")
    args = ap.parse_args(argv)
    records = [json.loads((RESULTS / name).read_text()) for name in args.runs]
    costs = [run_own_costs(record) for record in records]
    tasks = list(costs[0])
    if any(list(c) != tasks for c in costs):
        ap.error("the runs measured different tasks")
    medians = {task: statistics.median(c[task] for c in costs) for task in tasks}
    command = " ".join(["python benchmarks/step_split_runs.py", *(argv if argv is not None else sys.argv[1:])])

    def cell(value: float) -> str:
        return f"{value:.1f} ({'yes' if value <= args.goal else 'no'})"

    lines = [
        "# npsco's own cost per env step, several runs",
        "",
        f"`{command}`",
        "",
        f"Own cost in CPU microseconds per env step (each run: the median over its repeats); in brackets whether it is "
        f"at most {args.goal:g} us.",
        "",
        "| task | " + " | ".join(name.removesuffix(".json") for name in args.runs) + " | median of the runs |",
        "|---|" + "---:|" * (len(args.runs) + 1),
    ]
    for task in tasks:
        lines.append(f"| {task} | " + " | ".join(cell(c[task]) for c in costs) + f" | **{cell(medians[task])}** |")
    met = all(v <= args.goal for v in medians.values())
    lines += ["", f"Median of the runs within {args.goal:g} us on every task: **{'yes' if met else 'no'}**."]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.with_suffix(".md").write_text(text)
    record = {"runs": args.runs, "goal_us": args.goal, "own_us": costs, "median_us": medians, "met": met}
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
