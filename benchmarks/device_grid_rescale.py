"""The 16-core record of the paper grid (100k steps per policy), re-scaled by a measured per-process speed-up.

    python benchmarks/device_grid_rescale.py --out benchmarks/results/throughput/device_grid_rescaled
    python benchmarks/device_grid_rescale.py --ab step_split_ab.json --ab step_split_ab_env.json \
        --methods throughput_methods.json --out /tmp/rescaled      # two A/B steps of the code, one after the other
    python benchmarks/device_grid_rescale.py --chain-ab chain_ab.json --out /tmp/rescaled   # the record's code, direct

Reads the record (`device_grid_check_2026-11-27/`: every population's manifest, with each policy's wall seconds at
16-way load), the A/B measurements of PPO's CPU time per env step before and after (`step_split_ab.json` by default;
a record with the whole step's paired ratios, as `step_split_ab.py` writes since 057a39f, gives the speed-up as 1 /
their median, an older one as the ratio of its medians of the env step plus npsco's own parts) and each method's
speed relative to PPO before and after (`throughput_methods_402ef1c.json`, `throughput_methods.json`). Per task, the
critical path is the slowest reference plus the longest chain of novel policies (one after another); a PPO second
becomes 1 / speed-up seconds, and a method's second is further scaled by its ratio before / after. Several A/B
records (`--ab`, each a later step of the code measured against the one before) multiply their speed-ups. Scaled by
10 to 1M steps per policy, and the wall time by the record's wall / critical-path factor. An estimate: the speed-up
is the 2-core machine's, applied to the 16-core one.

With `--chain-ab` (a `chain_ab.py` record of the record's own code against a later one, every method of the grid),
every policy of the record is re-scaled by its own method's measured speed-up on its task (the references by PPO's),
and each task's longest chain is taken after that: no chain of A/B steps, no method ratios.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results/throughput"
RECORD = RESULTS / "device_grid_check_2026-11-27"
SCALE = 10
"""The record's 100k steps per policy to the paper's 1M."""


def record_times(record: Path) -> dict[str, dict[str, float]]:
    """Per task and method, the seconds the record's manifests give: PPO's slowest reference, and each other method's
    longest chain of novel policies (one after another; Hopper's IPD has one chain per threshold)."""
    out: dict[str, dict[str, float]] = {}
    for path in sorted(record.glob("manifest_*.json")):
        task, method = path.stem.removeprefix("manifest_").rsplit("_", 1)
        members = json.loads(path.read_text())["members"]
        if method == "ppo":
            seconds = max(m["wall_seconds"] for m in members if m["role"] == "reference")
        else:
            chains: dict[str, float] = {}
            for m in members:
                if m["role"] == "novel":
                    chains[m["chain"]] = chains.get(m["chain"], 0.0) + m["wall_seconds"]
            seconds = max(chains.values(), default=0.0)
        out.setdefault(task, {})[method] = seconds
    return out


def critical_paths(record: Path) -> dict[str, dict]:
    """Per task: the slowest reference's seconds, and the longest chain's method and seconds (from the manifests)."""
    out: dict[str, dict] = {}
    for task, times in record_times(record).items():
        method = max((m for m in times if m != "ppo"), key=lambda m: times[m], default=None)
        out[task] = {"reference": times["ppo"], "chain": times[method] if method else 0.0, "method": method}
    return out


def ppo_speedup(ab: dict, task: str) -> float:
    """PPO's speed-up per env step in an A/B record: 1 / the median of the repeats' paired ratios of the whole step
    (after / before, each pair measured in the same minutes), where the record has them; an older record, without,
    gives the ratio of the checkouts' medians (env step plus npsco's own parts)."""
    row = ab["tasks"][task]
    if "total_ratio_median" in row:
        return 1.0 / row["total_ratio_median"]
    parts = row["parts_median_us"]
    return sum(parts["before"].values()) / sum(parts["after"].values())


def rescaled_paths(record: Path, speedups: dict[str, dict[str, float]]) -> dict[str, dict]:
    """Per task, the critical path after every policy of the record is re-scaled by its method's speed-up on that task
    (`speedups[task][method]`; the references by PPO's): the slowest reference then and now, the longest chain then
    (`chain`, of `method_then`) and the longest now (`chain_now`, of `method`, at `method_speedup`)."""
    times = record_times(record)
    missing = sorted(f"{t} {m}" for t in times for m in times[t] if m not in speedups.get(t, {}))
    if missing:
        raise SystemExit(f"no speed-up for {', '.join(missing)}: the A/B record must measure every method of the grid")
    out: dict[str, dict] = {}
    for task, seconds in times.items():
        now = {m: s / speedups[task][m] for m, s in seconds.items() if m != "ppo"}
        method_then, method = max(now, key=lambda m: seconds[m]), max(now, key=lambda m: now[m])
        out[task] = {
            "reference": seconds["ppo"],
            "reference_now": seconds["ppo"] / speedups[task]["ppo"],
            "chain": seconds[method_then],
            "method_then": method_then,
            "chain_now": now[method],
            "method": method,
            "method_speedup": speedups[task][method],
        }
    return out


def conclusion(critical: float, wall_factor: float, record_wall: float) -> list[str]:
    """The projection's closing lines: the longest critical path at 1M steps and the wall time it projects."""
    return [
        "",
        f"Longest critical path at 1M steps: **{critical:.1f} minutes**; with the record's wall / critical-path factor "
        f"({wall_factor:.2f}) the projected wall time is **{critical * wall_factor:.1f} minutes** on 16 cores "
        f"(the record itself: {record_wall * SCALE / 60:.1f}). An estimate: the speed-ups were measured on the 2-core "
        "machine, one process at a time, and are applied to policies that ran 16 at once.",
    ]


def write(out: Path, lines: list[str], record: dict) -> None:
    """The projection as markdown (also printed) and JSON."""
    text = "\n".join(lines) + "\n"
    print(text)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


def chain_ab_main(args: argparse.Namespace, command: str) -> int:
    """`--chain-ab`: the record re-scaled policy by policy with the direct A/B's speed-ups."""
    ab = json.loads((RESULTS / args.chain_ab).read_text())
    speedups: dict[str, dict[str, float]] = {}
    for row in ab["rows"]:
        speedups.setdefault(row["task"], {})[row["method"]] = row["speedup"]
    summary = json.loads((RECORD / "summary.json").read_text())
    paths = rescaled_paths(RECORD, speedups)
    longest_then = max(p["reference"] + p["chain"] for p in paths.values())
    wall_factor = summary["sweep"]["wall_seconds"] / longest_then
    for p in paths.values():
        p["then_s"], p["now_s"] = p["reference"] + p["chain"], p["reference_now"] + p["chain_now"]
        p["now_1m_min"] = p["now_s"] * SCALE / 60
    critical = max(p["now_1m_min"] for p in paths.values())
    # the same with every speed-up at its CI's slow end, then its fast end (the record's ratio CIs, where it has them)
    band = None
    if all("ratio_ci" in row for row in ab["rows"]):
        ends = []
        for end in (1, 0):  # the ratio's upper bound is the slow end
            bound: dict[str, dict[str, float]] = {}
            for row in ab["rows"]:
                bound.setdefault(row["task"], {})[row["method"]] = 1.0 / row["ratio_ci"][end]
            ends.append(
                max(q["reference_now"] + q["chain_now"] for q in rescaled_paths(RECORD, bound).values()) * SCALE / 60
            )
        band = ends[1] * wall_factor, ends[0] * wall_factor
    revs = ab["revisions"]
    lines = [
        "# The paper grid on 16 cores, re-scaled policy by policy from the record's own code",
        "",
        f"`{command}`",
        "",
        f"From the 16-core record (`device_grid_check_2026-11-27/`: {summary['sweep']['wall_seconds']} s wall at 100k "
        f"steps per policy, {wall_factor:.2f} x its longest critical path), each policy's wall seconds divided by its "
        f"method's speed-up on its task, measured directly from the record's code to today's "
        f"(`{args.chain_ab.removesuffix('.json')}.md`, commits {revs['before']} -> {revs['after']}).",
        "",
        "| task | slowest reference then (s) | PPO speed-up | longest chain then (s) | longest chain now: method | "
        "its speed-up | critical path then (s) | now (s) | now at 1M steps (min) |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for task, p in paths.items():
        lines.append(
            f"| {task} | {p['reference']:.1f} | {speedups[task]['ppo']:.2f} | {p['chain']:.1f} | {p['method']} | "
            f"{p['method_speedup']:.2f} | {p['then_s']:.1f} | {p['now_s']:.1f} | {p['now_1m_min']:.1f} |"
        )
    lines += conclusion(critical, wall_factor, summary["sweep"]["wall_seconds"])
    if band is not None:
        lines += [
            "",
            f"With every speed-up at its 95% CI's fast end, then at its slow end: **{band[0]:.1f} to {band[1]:.1f} "
            "minutes** of wall time (a band, not a CI of the projection: the ends are taken together).",
        ]
    record = {
        "chain_ab": args.chain_ab,
        "wall_1m_min_band": band,
        "tasks": paths,
        "wall_factor": wall_factor,
        "critical_1m_min": critical,
        "wall_1m_min": critical * wall_factor,
    }
    write(args.out, lines, record)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--chain-ab",
        help="a chain_ab.py record in benchmarks/results/throughput (the record's code against a later one); "
        "replaces --ab and --methods",
    )
    ap.add_argument(
        "--ab",
        action="append",
        help="an A/B record in benchmarks/results/throughput (repeatable, in the code's order; "
        "default: step_split_ab.json)",
    )
    ap.add_argument(
        "--methods",
        help="the methods' ratios after, in benchmarks/results/throughput (default: throughput_methods.json)",
    )
    ap.add_argument("--out", type=Path, required=True, help="results path without suffix (.md and .json)")
    args = ap.parse_args(argv)
    command = " ".join(["python benchmarks/device_grid_rescale.py", *(argv if argv is not None else sys.argv[1:])])
    if args.chain_ab:
        if args.ab or args.methods:
            ap.error("--chain-ab replaces --ab and --methods")
        return chain_ab_main(args, command)
    args.methods = args.methods or "throughput_methods.json"
    ab_names = args.ab or ["step_split_ab.json"]
    records = [json.loads((RESULTS / name).read_text()) for name in ab_names]
    before = json.loads((RESULTS / "throughput_methods_402ef1c.json").read_text())["methods"]
    after = json.loads((RESULTS / args.methods).read_text())["methods"]
    summary = json.loads((RECORD / "summary.json").read_text())
    paths = critical_paths(RECORD)
    longest_then = max(p["reference"] + p["chain"] for p in paths.values())
    wall_factor = summary["sweep"]["wall_seconds"] / longest_then
    rows = {}
    for task, p in paths.items():
        s = 1.0
        for ab in records:
            s *= ppo_speedup(ab, task)
        method_scale = before[p["method"]]["ratio_to_ppo"] / after[p["method"]]["ratio_to_ppo"]
        now = p["reference"] / s + p["chain"] / s * method_scale
        rows[task] = {
            **p,
            "ppo_speedup": s,
            "method_scale": method_scale,
            "then_s": p["reference"] + p["chain"],
            "now_s": now,
            "now_1m_min": now * SCALE / 60,
        }
    critical = max(r["now_1m_min"] for r in rows.values())
    sources = ", then ".join(
        f"`{name.removesuffix('.json')}.md`, commits {ab['revisions']['before']} -> {ab['revisions']['after']}"
        for name, ab in zip(ab_names, records, strict=True)
    )
    lines = [
        "# The paper grid on 16 cores, re-scaled by the measured per-process speed-up",
        "",
        f"`{command}`",
        "",
        f"From the 16-core record (`device_grid_check_2026-11-27/`: {summary['sweep']['wall_seconds']} s wall at 100k "
        f"steps per policy, {wall_factor:.2f} x its longest critical path), PPO's speed-up per task ({sources}) and "
        "the chain method's ratio to PPO before and after (`throughput_methods_402ef1c.md`, "
        f"`{args.methods.removesuffix('.json')}.md`).",
        "",
        "| task | slowest reference (s) | longest chain (s) | its method | PPO speed-up | method factor | "
        "critical path then (s) | now (s) | now at 1M steps (min) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for task, r in rows.items():
        lines.append(
            f"| {task} | {r['reference']:.1f} | {r['chain']:.1f} | {r['method']} | {r['ppo_speedup']:.2f} | "
            f"{r['method_scale']:.2f} | {r['then_s']:.1f} | {r['now_s']:.1f} | {r['now_1m_min']:.1f} |"
        )
    lines += conclusion(critical, wall_factor, summary["sweep"]["wall_seconds"])
    record = {
        "ab": ab_names,
        "methods": args.methods,
        "tasks": rows,
        "wall_factor": wall_factor,
        "critical_1m_min": critical,
        "wall_1m_min": critical * wall_factor,
    }
    write(args.out, lines, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
