"""The maze Fig. 2 criterion from other starts on the right edge, for policies that `benchmarks/maze_ipd.py` already
trained (no training here): is the criterion's outcome a property of IPD or of the one start it looks at?

    python benchmarks/maze_fig2_starts.py runs/bench/maze_ipd runs/bench/maze_ipd_s100 ... runs/bench/maze_ipd_s1700

For every replicate (a `maze_ipd.py` runs directory: its `refs` population and one `ipd-r0xS` population per
threshold multiple S), every chain (the 5 PPO references; the 5 IPD policies of a multiple) and every start
(x = 14.5, y = 2, 4, ..., 14; y = 8 is Fig. 2's start (14.5, 8), 1.5 from the centre of the +1 goal on the right edge),
it records the goal each policy's deterministic trajectory reaches, and the number of distinct goals the chain reaches.
Writes `benchmarks/results/maze_ipd/maze_fig2_starts.{json,md}`. The criterion per start: PPO <= 2 distinct goals,
IPD >= 3 (the issue's 90% goal-reaching condition from random starts does not depend on the start and is not re-checked
here).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "maze_ipd"
YS = (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0)
X = 14.5


def chain_goals(run: Path, role: str) -> list[list[str]]:
    """Per trained policy of `role` in the population run `run`: its goal from each start in YS."""
    from npsco.envs.maze import goal_name
    from npsco.episodes import run_episodes
    from npsco.evaluation.runs import load_run
    from npsco.policy import load_policy

    info = load_run(run)
    members = sorted(
        (m for m in info.members if m.role == role), key=lambda m: m.index if m.index is not None else m.seed
    )
    starts = [(X, y) for y in YS]
    out = []
    for m in members:
        episodes = run_episodes(load_policy(info.checkpoint(m)), len(starts), seed=0, start=starts)
        assert episodes.goals is not None  # the maze records goals
        out.append([goal_name(int(g)) for g in episodes.goals])
    return out


def distinct(goals: list[list[str]], k: int) -> int:
    return len({g[k] for g in goals} - {"none"})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="maze_ipd.py runs directories (one per replicate)")
    p.add_argument("--out", default=str(RESULTS / "maze_fig2_starts"))
    args = p.parse_args()

    data: dict = {
        "command": "python benchmarks/maze_fig2_starts.py " + " ".join(args.runs),
        "starts": [[X, y] for y in YS],
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "replicates": {},
    }
    for run in args.runs:
        run = Path(run)
        rep: dict = {"ppo": chain_goals(run / "refs", "reference"), "ipd": {}}
        for chain in sorted(run.glob("ipd-r0x*")):
            scale = chain.name.removeprefix("ipd-r0x")
            if not scale.replace(".", "").isdigit():  # tagged variants (-sample, -t0) are not the default settings
                continue
            rep["ipd"][scale] = chain_goals(chain, "novel")
        data["replicates"][run.name] = rep
        print(f"{run.name}: done", file=sys.stderr, flush=True)

    scales = sorted({s for r in data["replicates"].values() for s in r["ipd"]}, key=float)
    lines = [
        "# Maze Fig. 2 criterion from other right-edge starts",
        "",
        f"`{data['command']}` ({data['date']}): the "
        f"policies trained by `benchmarks/maze_ipd.py` ({len(data['replicates'])} replicates), evaluated from "
        "starts (14.5, y). Cells: the "
        "number of distinct goals the chain's 5 policies reach from that start (the 5 PPO seeds; the 5 IPD "
        "policies at that multiple of r0); **bold** where PPO <= 2 and IPD >= 3. y = 8 is Fig. 2's start, next "
        "to the +1 goal.",
        "",
    ]
    header = "| replicate | chain | " + " | ".join(f"y = {y:g}" for y in YS) + " |"
    lines += [header, "|" + "---|" * (len(YS) + 2)]
    met = {s: [0] * len(YS) for s in scales}
    for name, rep in data["replicates"].items():
        ppo = [distinct(rep["ppo"], k) for k in range(len(YS))]
        lines.append(f"| {name} | PPO | " + " | ".join(str(n) for n in ppo) + " |")
        for s in scales:
            if s not in rep["ipd"]:
                continue
            ipd = [distinct(rep["ipd"][s], k) for k in range(len(YS))]
            cells = []
            for k, n in enumerate(ipd):
                ok = ppo[k] <= 2 and n >= 3
                met[s][k] += ok
                cells.append(f"**{n}**" if ok else str(n))
            lines.append(f"| {name} | IPD {s}x | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Replicates meeting the criterion (goal counts only), per multiple and start:",
        "",
        "| multiple | " + " | ".join(f"y = {y:g}" for y in YS) + " |",
        "|" + "---|" * (len(YS) + 1),
    ]
    for s in scales:
        lines.append(f"| {s}x | " + " | ".join(f"{n}/{len(data['replicates'])}" for n in met[s]) + " |")
    data["met"] = met
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
