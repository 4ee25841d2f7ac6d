"""Every method of the paper grid, two checkouts against each other: `method_iterations.py` run in each, alternating.

    python benchmarks/chain_ab.py BEFORE AFTER --repeats 5 --iterations 10 --out benchmarks/results/throughput/chain_ab
    python benchmarks/chain_ab.py BEFORE AFTER --repeats 1 --iterations 1 --env Hopper-v5 --method ppo --out /tmp/ab

BEFORE and AFTER are checkouts, each with its `.venv` (`git worktree add ../before REV && bash scripts/setup.sh`
there). Each repeat runs every (task, method) in BEFORE and in AFTER, the order of the two alternating from one repeat
to the next, each in a fresh process of that checkout's Python (`method_iterations.py`: CPU seconds of training
iterations, the median of `--iterations`), with seed r in repeat r in both: where the checkouts' training differs bit
for bit (as it does across 584aa40), one seed would give each checkout a fixed, different set of episodes in every
repeat, a difference that no number of repeats averages out. Each pair is refused unless each checkout imported its
own npsco and both ran the same versions of Gymnasium, MuJoCo, numpy, torch and numba. A method avoids `--refs`
policies of the paper campaign at the threshold of the 16-core record's manifests (`device_grid_check_2026-11-27/`,
`r0_default`); PPO avoids none.

Per (task, method): each checkout's median over repeats, the paired ratio AFTER / BEFORE (median over repeats and a
95% bootstrap CI of it) and the speed-up 1 / that median, which `device_grid_rescale.py --chain-ab` applies to the
record. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from method_iterations import METHODS  # noqa: E402  (the sibling script that is run)
from step_split import bootstrap_median_ci  # noqa: E402
from step_split_ab import check_checkouts, revision  # noqa: E402

HERE = Path(__file__).resolve().parent
WORKER = HERE / "method_iterations.py"
RECORD = HERE / "results/throughput/device_grid_check_2026-11-27"
TASKS = ("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5")


def record_r0(task: str) -> float:
    """The threshold the 16-core record's populations of `task` trained at (1x: the paper's)."""
    return float(json.loads((RECORD / f"manifest_{task}_ipd.json").read_text())["r0_default"])  # every method's


def run_once(checkout: Path, task: str, method: str, refs: int, iterations: int, seed: int, out: Path) -> dict:
    """`method_iterations.py`'s record of `method` on `task`, measured in `checkout` by its own Python (without a
    PYTHONPATH of ours, which could make both checkouts import the same npsco)."""
    command = [str(checkout / ".venv/bin/python"), str(WORKER), "--env", task, "--method", method]
    command += ["--refs", str(refs), "--r0", repr(record_r0(task)), "--iterations", str(iterations)]
    command += ["--seed", str(seed), "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(command, cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def check_software(checkouts: dict[str, Path], seen: dict[str, dict[str, str]]) -> None:
    """Refuse a comparison where a checkout ran another checkout's npsco, or the libraries' versions differ."""
    for name, checkout in checkouts.items():
        if not Path(seen[name]["npsco"]).is_relative_to(checkout.resolve()):
            raise SystemExit(f"{name} ({checkout}) imported npsco from {seen[name]['npsco']}, not its own")
    libraries = {name: {k: v for k, v in s.items() if k != "npsco"} for name, s in seen.items()}
    if libraries["before"] != libraries["after"]:
        raise SystemExit(f"the checkouts run different libraries: {libraries['before']} and {libraries['after']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path, help="the checkout measured as the base")
    ap.add_argument("after", type=Path, help="the checkout measured against it")
    ap.add_argument("--repeats", type=int, default=5, help="rounds of both checkouts (default 5)")
    ap.add_argument("--iterations", type=int, default=10, help="measured iterations per run (default 10)")
    ap.add_argument("--refs", type=int, default=7, help="policies a method avoids (default 7: a chain's mean)")
    ap.add_argument("--env", action="append", help="a task (repeatable; default: the paper's three)")
    ap.add_argument("--method", action="append", choices=METHODS, help="a method (repeatable; default: all)")
    ap.add_argument("--out", type=Path, required=True, help="results path without suffix (.md and .json)")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.iterations < 1:
        ap.error("--repeats and --iterations must be >= 1")
    check_checkouts(ap, args.before, args.after)
    tasks, methods = args.env or list(TASKS), args.method or list(METHODS)
    revs = {"before": revision(args.before), "after": revision(args.after)}
    checkouts = {"before": args.before, "after": args.after}
    runs: list[dict] = []
    seconds: dict[str, dict[str, dict[str, list[float]]]] = {
        t: {m: {"before": [], "after": []} for m in methods} for t in tasks
    }
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for task in tasks:
                for method in methods:
                    seen = {}
                    for name in order:
                        out = Path(tmp) / "run.json"
                        run = run_once(checkouts[name], task, method, args.refs, args.iterations, r + 1, out)
                        seconds[task][method][name].append(float(run["median"]))
                        seen[name] = run["software"]
                        runs.append({"repeat": r + 1, "task": task, "method": method, "checkout": name, **run})
                    check_software(checkouts, seen)
                    pair = seconds[task][method]
                    print(
                        f"repeat {r + 1}/{args.repeats} {task} {method}: {pair['before'][-1]:.3f} s -> "
                        f"{pair['after'][-1]:.3f} s",
                        flush=True,
                    )
    rows = []
    for task in tasks:
        for method in methods:
            pair = seconds[task][method]
            ratios = [a / b for a, b in zip(pair["after"], pair["before"], strict=True)]
            ratio = float(np.median(ratios))
            lo, hi = bootstrap_median_ci(ratios)
            rows.append(
                {
                    "task": task,
                    "method": method,
                    "before": float(np.median(pair["before"])),
                    "after": float(np.median(pair["after"])),
                    "ratio": ratio,
                    "ratio_ci": [lo, hi],
                    "speedup": 1.0 / ratio,
                    "ratios": ratios,
                }
            )
    command = " ".join(["python benchmarks/chain_ab.py", *(argv if argv is not None else sys.argv[1:])])
    lines = [
        "# The paper grid's methods, two checkouts against each other",
        "",
        f"`{command}`",
        "",
        f"Started {started}; before = {revs['before']}, after = {revs['after']}; {args.repeats} repeats, the order "
        f"alternating; per run the median of {args.iterations} iterations of 2048 steps (CPU seconds, default preset, "
        f"seed r in repeat r); a method avoids {args.refs} policies at the record's threshold.",
        "",
        "| task | method | before (s / iteration) | after | after / before (median of pairs) | 95% CI | speed-up |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        lo, hi = row["ratio_ci"]
        lines.append(
            f"| {row['task']} | {row['method']} | {row['before']:.3f} | {row['after']:.3f} | {row['ratio']:.3f} | "
            f"[{lo:.3f}, {hi:.3f}] | {row['speedup']:.3f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.with_suffix(".md").write_text(text)
    record = {
        "command": command,
        "started": started,
        "revisions": revs,
        "repeats": args.repeats,
        "iterations": args.iterations,
        "refs": args.refs,
        "rows": rows,
        "seconds": seconds,
        "software": {name: next(r["software"] for r in runs if r["checkout"] == name) for name in checkouts},
        "runs": runs,
    }
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
