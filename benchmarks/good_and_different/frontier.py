"""The frontier picture: per task, every novel policy npsco has measured, its return over the references' median
against its nearest distance over r0, one marker per method or setting, with the paper's criteria drawn as lines
(return ratio 0.8, nearest / r0 1). The policies that meet both lie in the upper right; which constraint bound a miss
shows at a glance.

    python benchmarks/good_and_different/frontier.py LABEL=ROWS.json ... --out frontier.png [--md frontier.md]

Each ROWS.json is a measurement of `benchmarks/novel_everywhere/measure.py` (`rows` with `task`, `setting`,
`return_ratio`, `nearest_ratio`); LABEL names its study in the legend (`screen`, `dev`, ...), and each point is
labelled `LABEL: setting`. `--md` writes the counts per study, setting and task beside the figure.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from matplotlib.figure import Figure

from npsco.io import atomic_write_text
from npsco.selection import RETURN_RATIO

TASKS = ("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5")
MARKERS = "osD^v<>phX*P8"
RETURN_LINE, DISTANCE_LINE = RETURN_RATIO, 1.0
"""The paper's criteria: return >= RETURN_RATIO x the references' median, nearest >= r0."""


def chain_or_setting(row: dict) -> str:
    """The row's setting, or its chain where a run holds chains at several thresholds (`ipd-r0x0.5/k0`)."""
    chain = str(row.get("name", "")).split("/")[0]
    return chain if chain.startswith(f"{row['setting']}-") else row["setting"]


def load(specs: list[str]) -> list[dict]:
    """The rows of each `LABEL=path`, each with its `group` (`LABEL: setting`)."""
    rows = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            raise SystemExit(f"expected LABEL=ROWS.json, got {spec!r}")
        for row in json.loads(Path(path).read_text())["rows"]:
            if row.get("return_ratio") is not None and row.get("nearest_ratio") is not None:
                rows.append({**row, "group": f"{label}: {chain_or_setting(row)}"})
    return rows


def figure(rows: list[dict]) -> Figure:
    """One panel per task, return ratio against nearest / r0, a marker per group, the criteria as dashed lines."""
    groups = sorted({r["group"] for r in rows})
    tasks = [t for t in TASKS if any(r["task"] == t for r in rows)] + sorted({r["task"] for r in rows} - set(TASKS))
    fig = Figure(figsize=(4.2 * len(tasks) + 2.6, 4.2), layout="constrained")
    axes = fig.subplots(1, len(tasks), squeeze=False)[0]
    colours = [f"C{i % 10}" for i in range(len(groups))]
    for ax, task in zip(axes, tasks, strict=True):
        for i, group in enumerate(groups):
            sel = [r for r in rows if r["task"] == task and r["group"] == group]
            if sel:
                ax.scatter(
                    [r["nearest_ratio"] for r in sel],
                    [r["return_ratio"] for r in sel],
                    marker=MARKERS[i % len(MARKERS)],
                    color=colours[i],
                    label=group,
                    alpha=0.8,
                    s=28,
                )
        ax.axhline(RETURN_LINE, color="grey", linestyle="--", linewidth=1)
        ax.axvline(DISTANCE_LINE, color="grey", linestyle="--", linewidth=1)
        ax.set_title(task)
        ax.set_xlabel("nearest distance / r0")
        ax.set_ylabel("return / references' median")
    handles, labels = [], []
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, loc="outside right center", fontsize="small")
    return fig


def counts(rows: list[dict]) -> str:
    """Per group and task: policies, how many meet both criteria, and how many miss on the return, the distance or
    both."""
    table: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        table[(r["group"], r["task"])].append(r)
    lines = [
        "| study: setting | task | n | meet | miss: return | miss: distance | miss: both |",
        "|---|---|---|---|---|---|---|",
    ]
    for (group, task), sel in sorted(table.items()):
        low_r = [r["return_ratio"] < RETURN_LINE for r in sel]
        low_d = [r["nearest_ratio"] < DISTANCE_LINE for r in sel]
        lines.append(
            f"| {group} | {task} | {len(sel)} | {sum(not a and not b for a, b in zip(low_r, low_d, strict=True))} "
            f"| {sum(a and not b for a, b in zip(low_r, low_d, strict=True))} "
            f"| {sum(b and not a for a, b in zip(low_r, low_d, strict=True))} "
            f"| {sum(a and b for a, b in zip(low_r, low_d, strict=True))} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", metavar="LABEL=ROWS.json")
    parser.add_argument("--out", required=True, help="the figure (PNG)")
    parser.add_argument("--md", default=None, help="the counts per study, setting and task (Markdown)")
    args = parser.parse_args(argv)
    rows = load(args.rows)
    if not rows:
        raise SystemExit("no rows with a return ratio and a nearest distance")
    figure(rows).savefig(args.out, dpi=110)
    if args.md:
        command = "python benchmarks/good_and_different/frontier.py " + " ".join(args.rows) + f" --out {args.out}"
        atomic_write_text(
            args.md,
            f"# The frontier: return against distance\n\nMade by `{command} --md {args.md}`.\n\n"
            f"![frontier]({Path(args.out).name})\n\n" + counts(rows),
        )
    print(f"{len(rows)} policies: {args.out}")


if __name__ == "__main__":
    main()
