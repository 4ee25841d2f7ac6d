"""What moved when evaluation started computing each episode's actions alone (`npsco.forward`): the committed studies'
numbers measured by the batched evaluation (BLAS matrix products over the episodes run side by side) against the same
policies re-measured row by row, the same episodes and seeds.

    python benchmarks/rowwise_remeasure.py --out benchmarks/results/rowwise/compare \
        --report "paper campaign (Table 1)" OLD/evaluation.csv NEW/evaluation.csv \
        --measure "good and different, confirmation" OLD.json NEW.json ...

`--report LABEL OLD NEW`: two `npsco report` evaluation.csv files of the same runs (every policy, references
included): per task and group, the mean return before and after, and per policy the change. `--measure LABEL OLD NEW`:
two `benchmarks/novel_everywhere/measure.py` JSON files of the same runs: per task, how many policies meet the
criteria before and after, each verdict that changed, and the changes of the return ratio and nearest / r0.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from npsco.io import atomic_write_json, atomic_write_text


def read_report(path: Path) -> dict[str, dict[str, str]]:
    """A report's evaluation.csv rows, by checkpoint."""
    with path.open(newline="") as f:
        return {row["checkpoint"]: row for row in csv.DictReader(f)}


def read_measure(path: Path) -> dict[tuple[str, str], dict]:
    """A measure.py JSON's rows, by (run, name)."""
    return {(r["run"], r["name"]): r for r in json.loads(path.read_text())["rows"]}


def same_keys(label: str, old: dict, new: dict) -> list:
    if old.keys() != new.keys():
        raise SystemExit(f"{label}: the two files do not hold the same policies")
    return sorted(old)


def report_section(label: str, old_path: Path, new_path: Path) -> tuple[list[str], dict]:
    old, new = read_report(old_path), read_report(new_path)
    keys = same_keys(label, old, new)
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for k in keys:
        groups[(old[k]["task"], old[k]["group"])].append(k)
    lines = [
        f"## {label}",
        "",
        f"`{old_path}` (batched) against `{new_path}` (row by row): {len(keys)} policies, return over the same "
        "episodes and seeds.",
        "",
        "| task | group | policies | mean return, batched | mean return, row by row | largest change of a policy's "
        "return | policies whose return changed |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    changes = []
    for (task, group), ks in sorted(groups.items()):
        a = np.array([float(old[k]["return_mean"]) for k in ks])
        b = np.array([float(new[k]["return_mean"]) for k in ks])
        d = b - a
        changes += [{"checkpoint": k, "before": float(x), "after": float(y)} for k, x, y in zip(ks, a, b, strict=True)]
        worst = int(np.argmax(np.abs(d)))
        lines.append(
            f"| {task} | {group} | {len(ks)} | {a.mean():.1f} | {b.mean():.1f} | {d[worst]:+.1f} "
            f"({d[worst] / max(abs(a[worst]), 1e-9):+.1%}) | {int((d != 0).sum())} |"
        )
    d_all = np.array([c["after"] - c["before"] for c in changes])
    rel = np.abs(d_all) / np.maximum(np.abs([c["before"] for c in changes]), 1e-9)
    lines += [
        "",
        f"Over the {len(keys)} policies: {int((d_all != 0).sum())} returns changed; the change's median "
        f"{np.median(np.abs(d_all)):.1f} ({np.median(rel):.2%} of the return), its largest {np.abs(d_all).max():.1f} "
        f"({rel.max():.1%}).",
        "",
    ]
    return lines, {"label": label, "old": str(old_path), "new": str(new_path), "policies": changes}


def measure_section(label: str, old_path: Path, new_path: Path) -> tuple[list[str], dict]:
    old, new = read_measure(old_path), read_measure(new_path)
    keys = same_keys(label, old, new)
    by_task: dict[str, list] = defaultdict(list)
    for k in keys:
        by_task[old[k]["task"]].append(k)
    lines = [
        f"## {label}",
        "",
        f"`{old_path}` (batched) against `{new_path}` (row by row): {len(keys)} novel policies.",
        "",
        "| task | policies | meet, batched | meet, row by row | largest change of return / median PPO | largest "
        "change of nearest / r0 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    flips = []
    for task, ks in sorted(by_task.items()):
        ratio = [(new[k]["return_ratio"] or 0) - (old[k]["return_ratio"] or 0) for k in ks]
        near = [(new[k]["nearest_ratio"] or 0) - (old[k]["nearest_ratio"] or 0) for k in ks]
        lines.append(
            f"| {task} | {len(ks)} | {sum(bool(old[k]['meets']) for k in ks)} | "
            f"{sum(bool(new[k]['meets']) for k in ks)} | {max(ratio, key=abs):+.3f} | {max(near, key=abs):+.3f} |"
        )
        flips += [k for k in ks if bool(old[k]["meets"]) != bool(new[k]["meets"])]
    lines.append("")
    if flips:
        lines += ["Verdicts that changed:", ""]
        for k in flips:
            o, n = old[k], new[k]
            lines.append(
                f"- {o['task']} {o['setting']} {o['name']} (seed {o['seed']}): return / median "
                f"{o['return_ratio']:.3f} -> {n['return_ratio']:.3f}, nearest / r0 {o['nearest_ratio']:.3f} -> "
                f"{n['nearest_ratio']:.3f}: {'meets' if o['meets'] else 'misses'} -> "
                f"{'meets' if n['meets'] else 'misses'}"
            )
        lines.append("")
    else:
        lines += ["No verdict changed.", ""]
    rows = [{"run": k[0], "name": k[1], "before": old[k], "after": new[k]} for k in keys]
    return lines, {"label": label, "old": str(old_path), "new": str(new_path), "flips": len(flips), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", nargs=3, action="append", default=[], metavar=("LABEL", "OLD_CSV", "NEW_CSV"))
    ap.add_argument("--measure", nargs=3, action="append", default=[], metavar=("LABEL", "OLD_JSON", "NEW_JSON"))
    ap.add_argument("--out", type=Path, required=True, help="results path without suffix (.md and .json)")
    args = ap.parse_args(argv)
    if not args.report and not args.measure:
        ap.error("give at least one --report or --measure")
    lines = [
        "# What moved when each episode's actions were computed alone",
        "",
        "The same policies, episodes and seeds, evaluated by the batched evaluation (before) and row by row "
        "(`npsco.forward`, after). Made by:",
        "",
        "    python benchmarks/rowwise_remeasure.py "
        + " ".join(
            f'--{kind} "{label}" {old} {new}'
            for kind, items in (("report", args.report), ("measure", args.measure))
            for label, old, new in items
        )
        + f" --out {args.out}",
        "",
    ]
    sections = []
    for label, old, new in args.report:
        more, doc = report_section(label, Path(old), Path(new))
        lines += more
        sections.append(doc)
    for label, old, new in args.measure:
        more, doc = measure_section(label, Path(old), Path(new))
        lines += more
        sections.append(doc)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out.with_suffix(".md"), "\n".join(lines))
    atomic_write_json(args.out.with_suffix(".json"), {"sections": sections})
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
