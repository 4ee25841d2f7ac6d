"""The maze Fig. 2 target across independent replicates of `benchmarks/maze_ipd.py` (one results file per base seed).

    python benchmarks/maze_ipd.py --r0-scale 1 0.5 0.25 0.75 2                          # replicate 0 (seeds 0..)
    python benchmarks/maze_ipd.py --set seed=100 --r0-scale 0.25 0.5 1 0.75 2 \\
        --runs runs/bench/maze_ipd_s100 --results benchmarks/results/maze_ipd/maze_ipd_s100  # replicate 100, and so on
    python benchmarks/maze_ipd_replicates.py maze_ipd/maze_ipd maze_ipd/maze_ipd_s100 maze_ipd/maze_ipd_s200

Reads `benchmarks/results/NAME.json` for each NAME (a path under benchmarks/results/, without .json) and writes
`benchmarks/results/maze_ipd/maze_ipd_replicates.md`: per threshold multiple and replicate, the goals the 5 IPD
policies reach from the right start, whether the target is met, and the PPO seeds' goals. Only the chains with the
default IPD settings are counted, or with `--tag T` only the variant chains named `ipd-r0xS-T` (written to
`maze_ipd_replicates_T.md`). Under the table, the target's rate per multiple: over all replicates, over those where the
PPO part holds, and with top and bottom counted as one goal (the right start lies on the map's axis of symmetry, so top
vs bottom is a tie-break).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="+", help="results files (without .json) under benchmarks/results/")
    p.add_argument("--tag", default="", help="summarise the chains of this --tag variant of maze_ipd.py instead")
    p.add_argument("--out", default=None, help="default: benchmarks/results/maze_ipd/maze_ipd_replicates[_TAG].md")
    args = p.parse_args()
    out = Path(args.out or RESULTS / "maze_ipd" / f"maze_ipd_replicates{'_' + args.tag if args.tag else ''}.md")

    reps = {}
    for name in args.names:
        data = json.loads((RESULTS / f"{name}.json").read_text())
        seed = data["stages"]["ppo"]["policies"][0]["seed"]
        chains = {}
        for chain, stage in data["stages"].items():
            wanted = chain.endswith(f"-{args.tag}") if args.tag else not stage.get("method_settings")
            if chain == "ppo" or not wanted:
                continue
            chains[stage["r0_scale"]] = (stage, data["verdict"]["chains"][chain])
        reps[seed] = (name, data["verdict"], chains)
    scales = sorted({s for _, _, chains in reps.values() for s in chains})
    seeds = sorted(reps)

    variant = ""
    if args.tag:
        settings = {
            k: v
            for _, _, chains in reps.values()
            for stage, _ in chains.values()
            for k, v in stage["method_settings"].items()
        }
        variant = f" (variant `{args.tag}`: " + ", ".join(f"`{k}={v}`" for k, v in settings.items()) + ")"
    lines = [
        f"# Four Reward Maze, Fig. 2 target: replicates{variant}",
        "",
        f"`python benchmarks/maze_ipd_replicates.py {' '.join(args.names)}"
        + (f" --tag {args.tag}" if args.tag else "")
        + "` — from the results of "
        + ", ".join(f"`{os.path.relpath(RESULTS / reps[s][0], out.parent)}.md`" for s in seeds)
        + " (each: its command, code version and full tables).",
        "",
        "Replicate S = the population's base seed: PPO references S..S+4, IPD policies S+1000..S+1004 (the "
        "references are retrained per replicate, so r0_default differs). Target: the PPO seeds reach <= 2 "
        "distinct goals from the right start (14.5, 8), the 5 IPD policies >= 3, each IPD policy reaches a goal in "
        ">= 90% of random-start episodes. Cells: the IPD policies' right-start goals (distinct count, top and "
        "bottom as one in brackets), then `met` or not.",
        "",
        "| replicate | PPO right-start goals | r0_default | "
        + " | ".join(f"{s:g} x r0_default" for s in scales)
        + " |",
        "|---|---|---|" + "---|" * len(scales),
    ]
    met_count = {s: [0, 0] for s in scales}
    met_ppo_ok = {s: [0, 0] for s in scales}  # among the replicates whose PPO seeds reach <= 2 goals
    met_merged = {s: [0, 0] for s in scales}  # top and bottom as one goal, for the PPO seeds and the IPD policies
    for seed in seeds:
        name, verdict, chains = reps[seed]
        r0d = f"{next(iter(chains.values()))[0]['r0_default']:.3f}" if chains else "-"
        ppo_merged = {"top/bottom" if g in ("top", "bottom") else g for g in verdict["ppo_right_start_goals"]}
        cells = []
        for s in scales:
            if s not in chains:
                cells.append("not run")
                continue
            stage, v = chains[s]
            goals = [pol["right_start_goal"] for pol in stage["policies"]]
            met = v["target_met"]
            merged = v["distinct_top_bottom_as_one"] >= 3 and v["min_reached_goal_frac"] >= 0.9 and len(ppo_merged) <= 2
            for count, ok, counted in (
                (met_count, met, True),
                (met_ppo_ok, met, verdict["ppo_ok"]),
                (met_merged, merged, True),
            ):
                count[s][0] += int(ok and counted)
                count[s][1] += int(counted)
            worst = "" if v["min_reached_goal_frac"] >= 0.9 else f", worst reach {v['min_reached_goal_frac']:.2f}"
            cells.append(
                f"{', '.join(goals)}: {v['distinct']} ({v['distinct_top_bottom_as_one']}){worst}, "
                f"{'**met**' if met else 'not met'}"
            )
        ppo = verdict["ppo_right_start_goals"]
        lines.append(
            f"| {seed} | {', '.join(ppo)} ({len(ppo)}{'' if len(ppo) <= 2 else ': too many'}) | {r0d} | "
            + " | ".join(cells)
            + " |"
        )

    def rates(count: dict) -> str:
        return "; ".join(f"{s:g}x: {m}/{n}" for s, (m, n) in count.items())

    lines += [
        "",
        f"Target met, per multiple: {rates(met_count)}.",
        "",
        f"- Among the replicates whose PPO seeds reach <= 2 goals: {rates(met_ppo_ok)}.",
        f"- With top and bottom counted as one goal (PPO seeds <= 2, IPD policies >= 3, each reaching a goal in "
        f">= 90% of episodes): {rates(met_merged)}.",
    ]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
