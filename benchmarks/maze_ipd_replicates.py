"""The maze Fig. 2 target across independent replicates of `benchmarks/maze_ipd.py` (one results file per base seed).

    python benchmarks/maze_ipd.py --r0-scale 1 0.5 0.25 0.75 2                          # replicate 0 (seeds 0..)
    python benchmarks/maze_ipd.py --set seed=100 --r0-scale 0.25 0.5 1 0.75 2 \\
        --runs runs/bench/maze_ipd_s100 --results benchmarks/results/maze_ipd_s100      # replicate 100, and so on
    python benchmarks/maze_ipd_replicates.py maze_ipd maze_ipd_s100 maze_ipd_s200

Reads `benchmarks/results/NAME.json` for each NAME and writes `benchmarks/results/maze_ipd_replicates.md`: per threshold
multiple and replicate, the goals the 5 IPD policies reach from the right start, whether the target is met, and the
PPO seeds' goals. Only the chains with the default IPD settings are counted (no `--tag` variants).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="+", help="results files (without .json) under benchmarks/results/")
    p.add_argument("--out", default=str(RESULTS / "maze_ipd_replicates.md"))
    args = p.parse_args()

    reps = {}
    for name in args.names:
        data = json.loads((RESULTS / f"{name}.json").read_text())
        seed = data["stages"]["ppo"]["policies"][0]["seed"]
        chains = {}
        for chain, stage in data["stages"].items():
            if chain == "ppo" or stage.get("method_settings"):
                continue
            chains[stage["r0_scale"]] = (stage, data["verdict"]["chains"][chain])
        reps[seed] = (name, data["verdict"], chains)
    scales = sorted({s for _, _, chains in reps.values() for s in chains})
    seeds = sorted(reps)

    lines = ["# Four Reward Maze, Fig. 2 target: replicates", "",
             f"`python benchmarks/maze_ipd_replicates.py {' '.join(args.names)}` — from the results of "
             + ", ".join(f"`{reps[s][0]}.md`" for s in seeds) + " (each: its command, code version and full tables).",
             "",
             "Replicate S = the population's base seed: PPO references S..S+4, IPD policies S+1000..S+1004 (the "
             "references are retrained per replicate, so r0_default differs). Target: the PPO seeds reach <= 2 "
             "distinct goals from the right start (14.5, 8), the 5 IPD policies >= 3, each IPD policy reaches a goal in "
             ">= 90% of random-start episodes. Cells: the IPD policies' right-start goals (distinct count, top and "
             "bottom as one in brackets), then `met` or not.", "",
             "| replicate | PPO right-start goals | r0_default | " + " | ".join(f"{s:g} x r0_default" for s in scales) + " |",
             "|---|---|---|" + "---|" * len(scales)]
    met_count = {s: [0, 0] for s in scales}
    for seed in seeds:
        name, verdict, chains = reps[seed]
        r0d = next(iter(chains.values()))[0]["r0_default"] if chains else float("nan")
        cells = []
        for s in scales:
            if s not in chains:
                cells.append("not run")
                continue
            stage, v = chains[s]
            goals = [pol["right_start_goal"] for pol in stage["policies"]]
            met = v["target_met"]
            met_count[s][0] += int(met)
            met_count[s][1] += 1
            worst = "" if v["min_reached_goal_frac"] >= 0.9 else f", worst reach {v['min_reached_goal_frac']:.2f}"
            cells.append(f"{', '.join(goals)}: {v['distinct']} ({v['distinct_top_bottom_as_one']}){worst}, "
                         f"{'**met**' if met else 'not met'}")
        ppo = verdict["ppo_right_start_goals"]
        lines.append(f"| {seed} | {', '.join(ppo)} ({len(ppo)}{'' if len(ppo) <= 2 else ': too many'}) | {r0d:.3f} | "
                     + " | ".join(cells) + " |")
    lines += ["", "Target met, per multiple: " + "; ".join(f"{s:g}x: {m}/{n}" for s, (m, n) in met_count.items()) + "."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
