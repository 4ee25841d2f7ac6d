"""The measurements of the study "novel and good on every task" (benchmarks/results/novel_everywhere/PROTOCOL.md),
from npsco's own evaluation: every novel policy's return ratio, nearest distance / r0_default, whether it meets the
paper's criteria, and its state novelty, per setting and task, with mean +- std and IQM [95% bootstrap CI].

    python benchmarks/novel_everywhere/measure.py RUN... --out results.md [--json results.json] [--title TITLE]
        [--beside benchmarks/results/paper/report/evaluation.json]

Each RUN is a population run directory (or a folder of them, searched for manifest.json); its setting is its folder
name without a trailing `-s<seed>` (`lagr-s60000` -> `lagr`). Evaluation: `npsco evaluate RUN --episodes 10 --seed 0`
(reused from RUN/evaluation/ when up to date). `--beside EVALUATION_JSON` adds, per task, the table of the paper
campaign's methods (its report's evaluation, the same 10 episodes, seeds 0-9) with a row per run beside them, in the
same columns: for runs that borrow the campaign's references (their PPO row is the campaign's), one run per setting
and task. Runs trained with `--candidates C` also get a table of every slot's candidates: how many were trained,
which was kept, and whether the first and the kept one met the criteria in the population's own check (its final
evaluation, seed 10000, as the manifest records it), beside the kept one's verdict measured here. Runs whose
threshold is a state distance (`threshold.json` with `metric: state`) also get, post hoc and judging nothing, their
policies' state distance over that threshold and how many would meet on it (return ratio >= 0.8 and state distance
>= the state threshold).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

from npsco.evaluation import descriptors
from npsco.evaluation.evaluate import evaluate_runs
from npsco.evaluation.scoring import metric_summary
from npsco.io import atomic_write_json, atomic_write_text
from npsco.selection import RETURN_RATIO
from npsco.tasks import task_name

DESCRIPTORS = ("forward_speed", "step_frequency", "height_mean", "height_std", "pitch_mean", "pitch_std", "duty")

COLUMNS = ("return_mean", "return_ratio", "nearest", "nearest_ratio", "meets", "state_novelty", "state_distance")
EXTRA = ("yardstick", "yardstick_of", *DESCRIPTORS)
"""Reported beside, judging nothing: the yardstick and the behaviour descriptors (evaluations of format 4 on)."""


def population_runs(paths: list[str]) -> list[Path]:
    """The population run directories at or under `paths` (sorted)."""
    found: list[Path] = []
    for p in map(Path, paths):
        found += [p] if (p / "manifest.json").exists() else sorted(m.parent for m in p.rglob("manifest.json"))
    return found


def setting_of(run: Path) -> str:
    return re.sub(r"-s\d+$", "", run.name)


def fmt(summary: dict | None, digits: int = 2) -> str:
    if summary is None:
        return "-"
    return (
        f"{summary['mean']:.{digits}f} +- {summary['std']:.{digits}f}, IQM {summary['iqm']:.{digits}f} "
        f"[{summary['iqm_ci_low']:.{digits}f}, {summary['iqm_ci_high']:.{digits}f}]"
    )


def measure(runs: list[Path]) -> tuple[list[dict], list[dict]]:
    """One row per novel policy of `runs` (its task, setting, run, name, seed and `COLUMNS`), and each run's
    evaluation document."""
    docs = evaluate_runs([str(r) for r in runs], episodes=10, seed=0, log=lambda line: None)
    rows = []
    for run, doc in zip(runs, docs, strict=True):
        threshold = json.loads((run / "threshold.json").read_text()) if (run / "threshold.json").exists() else {}
        state_r0 = threshold.get("r0_default") if threshold.get("metric") == "state" else None
        for p in doc["policies"]:
            if p["role"] == "novel":
                rows.append(
                    {
                        "task": p["task"],
                        "setting": setting_of(run),
                        "run": str(run),
                        "name": p["name"],
                        "seed": p["seed"],
                        **{c: p.get(c) for c in COLUMNS},
                        **{c: p.get(c) for c in EXTRA},
                        "state_ratio": None
                        if state_r0 is None or p.get("state_distance") is None
                        else p["state_distance"] / state_r0,
                    }
                )
    return rows, docs


def beside(runs: list[Path], docs: list[dict], paper_json: str) -> list[str]:
    """Per task, the paper campaign's methods (`paper_json`: its report's evaluation) and each setting of `runs`, in
    the report's Table 1 columns."""
    paper = json.loads(Path(paper_json).read_text())["statistics"]["per_task"]
    new = [
        (setting_of(run), s)
        for run, doc in zip(runs, docs, strict=True)
        for s in doc["statistics"]["per_task"]
        if s["group"] != "ppo"  # a setting's references are the campaign's, whose row is the paper's PPO row
    ]
    lines = [
        "## Beside the paper campaign's methods",
        "",
        f"The paper campaign's rows are its report's ({paper_json}); the settings' rows are measured here the same "
        "way (10 deterministic episodes, seeds 0-9; success: the share of policies at the median PPO return, during "
        "training as the paper scores it, then with the final policy; relative novelty as the paper defines it). "
        "Meet: policies meeting the criteria (not measured in the campaign's report).",
    ]
    for task in sorted({s["task"] for _, s in new}):
        lines += [
            "",
            f"### {task}",
            "",
            "| method | n | reward | reward IQM [95% CI] | success (during, final) | rel. novelty | state novelty "
            "| meet |",
            "|---|---|---|---|---|---|---|---|",
        ]
        rows = [(s["group"], s) for s in paper if s["task"] == task] + [(n, s) for n, s in new if s["task"] == task]
        for name, s in rows:
            ret, nov, state = s["return"], s["relative_novelty_paper"], s["state_novelty"]
            meets = s.get("meets_rate")
            met = "-" if meets is None else f"{round(meets * s['n'])} of {s['n']}"
            lines.append(
                f"| {name} | {s['n']} | {ret['mean']:.0f} +- {ret['std']:.0f} "
                f"| {ret['iqm']:.0f} [{ret['iqm_ci_low']:.0f}, {ret['iqm_ci_high']:.0f}] "
                f"| {s['success_rate']:.1f}, {s['success_rate_final']:.1f} | {nov['mean']:.2f} "
                f"| {state['mean']:.2f} | {met} |"
            )
    return lines


def by_task_and_setting(items: list[dict]) -> list[tuple[tuple[str, str], list[dict]]]:
    """`items` (dicts with `task` and `setting`) grouped by the two, sorted."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for item in items:
        groups[(item["task"], item["setting"])].append(item)
    return sorted(groups.items())


def candidate_slots(runs: list[Path]) -> list[dict]:
    """Per novel slot of `runs` trained with candidates (its manifest member has `candidates`): the task, setting,
    slot, the number of candidates trained, the kept index, and the population's verdicts on the first and the kept
    candidate."""
    slots = []
    for run in runs:
        manifest = json.loads((run / "manifest.json").read_text())
        for member in manifest["members"]:
            cands = member.get("candidates") or []
            if member.get("role") != "novel" or not cands:
                continue
            kept = next((c for c in cands if c.get("kept")), None)
            slots.append(
                {
                    "task": task_name(manifest["env_id"]),  # as the evaluation's rows name it
                    "setting": setting_of(run),
                    "run": str(run),
                    "name": member["name"],
                    "trained": sum(c.get("status") == "done" for c in cands),
                    "kept": None if kept is None else kept["index"],
                    "first_meets": bool(cands[0].get("meets")),
                    "kept_meets": bool(kept and kept.get("meets")),
                }
            )
    return slots


def candidates_section(slots: list[dict], rows: list[dict]) -> list[str]:
    """The candidates table: per task and setting, then per slot."""
    measured = {(r["run"], r["name"]): bool(r["meets"]) for r in rows}
    lines = [
        "## Candidates",
        "",
        "Per slot, the candidates trained (`--candidates`): the first is the slot's own seed; the first that meets the "
        "criteria in the population's own check is kept, else the closest. \"Check\": the population's verdict "
        "(its final evaluation, 10 deterministic episodes from seed 10000, as the manifest records it); "
        "\"measured\": this file's (seeds 0-9, the protocol's measurement).",
        "",
        "| task | setting | slots | candidates trained | first meets (check) | kept meets (check) "
        "| kept meets (measured) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (task, setting), sel in by_task_and_setting(slots):
        n = len(sel)
        met = sum(measured.get((x["run"], x["name"]), False) for x in sel)
        lines.append(
            f"| {task} | {setting} | {n} | {sum(x['trained'] for x in sel)} "
            f"| {sum(x['first_meets'] for x in sel)} of {n} | {sum(x['kept_meets'] for x in sel)} of {n} "
            f"| {met} of {n} |"
        )
    lines += [
        "",
        "| task | setting | run | slot | trained | kept | first meets (check) | kept meets (check) "
        "| kept meets (measured) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    yes = {True: "yes", False: "no"}
    for x in sorted(slots, key=lambda x: (x["task"], x["setting"], x["run"], x["name"])):
        got = measured.get((x["run"], x["name"]))
        lines.append(
            f"| {x['task']} | {x['setting']} | {Path(x['run']).name} | {x['name']} | {x['trained']} "
            f"| {'-' if x['kept'] is None else x['kept']} | {yes[x['first_meets']]} "
            f"| {yes[x['kept_meets']]} | {'-' if got is None else yes[got]} |"
        )
    return lines


def state_section(rows: list[dict]) -> list[str]:
    """Post hoc, for runs with a state threshold: per task and setting, the state distance / the state threshold and
    how many policies would meet the criteria on it; and per policy."""
    sel_rows = [r for r in rows if r.get("state_ratio") is not None and r.get("return_ratio") is not None]
    if not sel_rows:
        return []
    lines = [
        "## On the state distance (post hoc, not a criterion)",
        "",
        "For runs trained against a state-distance threshold: the MMD state distance to the nearest avoided policy "
        "(this evaluation's, on its 10 episodes per policy) over the run's state threshold (`threshold.json`, the "
        "references' mean pairwise MMD as the population computed it, on 5 episodes per reference: the same kind "
        "of distance, not the same sample), "
        f'and how many policies would meet "return ratio >= {RETURN_RATIO} and state distance >= the state threshold". '
        "The protocol judges by the action distance; this decides nothing.",
        "",
        "| task | setting | n | state distance / state r0 | would meet on states |",
        "|---|---|---|---|---|",
    ]
    for (task, setting), sel in by_task_and_setting(sel_rows):
        would = sum(r["return_ratio"] >= RETURN_RATIO and r["state_ratio"] >= 1.0 for r in sel)
        lines.append(
            f"| {task} | {setting} | {len(sel)} | {fmt(metric_summary([r['state_ratio'] for r in sel]))} "
            f"| {would} of {len(sel)} |"
        )
    lines += ["", "| task | setting | policy | state distance / state r0 |", "|---|---|---|---|"]
    for r in sorted(sel_rows, key=lambda r: (r["task"], r["setting"], r["run"], r["name"])):
        lines.append(f"| {r['task']} | {r['setting']} | {Path(r['run']).name}/{r['name']} | {r['state_ratio']:.3f} |")
    return lines


def missed_on(row: dict) -> str:
    """Which criterion a policy missed: `return`, `distance`, `both`, or `` when it meets them."""
    low_return, low_distance = row["return_ratio"] < RETURN_RATIO, row["nearest_ratio"] < 1.0
    return {(True, True): "both", (True, False): "return", (False, True): "distance"}.get(
        (low_return, low_distance), ""
    )


def stick(row: dict) -> str:
    """The yardstick in words: `3 of 5 refs` (`-` without one)."""
    return "-" if row.get("yardstick") is None else f"{row['yardstick']} of {row['yardstick_of']} refs"


def descriptor_section(rows: list[dict]) -> list[str]:
    """How each policy moves (its evaluation's behaviour descriptors), where the evaluation has them."""
    sel = [r for r in rows if r.get("forward_speed") is not None]
    if not sel:
        return []
    lines = [
        "## How the policies move (reported, judging nothing)",
        "",
        "From each policy's 10 deterministic evaluation episodes (`npsco.evaluation.descriptors`): the root's mean "
        "forward speed, touchdowns per second (averaged over the feet), torso height and pitch (mean +- std over "
        "the steps), and each foot's share of steps on the floor.",
        "",
        "| task | setting | policy | " + " | ".join(descriptors.CELLS) + " |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(sel, key=lambda r: (r["task"], r["setting"], r["run"], r["name"])):
        row = [r["task"], r["setting"], f"{Path(r['run']).name}/{r['name']}", *descriptors.cells(r)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def report(rows: list[dict], title: str, command: str) -> str:
    lines = [f"# {title}", "", f"Made by `{command}`.", "", "## Per setting and task", ""]
    lines += [
        "| task | setting | n | meet | return / ref. median | nearest / r0 | state novelty (SW) "
        "| state distance (MMD) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (task, setting), sel in by_task_and_setting(rows):
        meets = sum(bool(r["meets"]) for r in sel)
        lines.append(
            f"| {task} | {setting} | {len(sel)} | {meets} | {fmt(metric_summary([r['return_ratio'] for r in sel]))} "
            f"| {fmt(metric_summary([r['nearest_ratio'] for r in sel]))} "
            f"| {fmt(metric_summary([r['state_novelty'] for r in sel]))} "
            f"| {fmt(metric_summary([r['state_distance'] for r in sel]), 3)} |"
        )
    lines += ["", "## Per setting, all tasks", "", "| setting | n | meet |", "|---|---|---|"]
    for setting in sorted({r["setting"] for r in rows}):
        sel = [r for r in rows if r["setting"] == setting]
        lines.append(f"| {setting} | {len(sel)} | {sum(bool(r['meets']) for r in sel)} |")
    lines += [
        "",
        "## Every policy",
        "",
        "| task | setting | policy | seed | return | return / ref. median | "
        "nearest / r0 | meets | missed on | more different than | state novelty | state distance |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["task"], r["setting"], r["run"], r["name"])):
        lines.append(
            f"| {r['task']} | {r['setting']} | {Path(r['run']).name}/{r['name']} | {r['seed']} "
            f"| {r['return_mean']:.1f} | {r['return_ratio']:.3f} | {r['nearest_ratio']:.3f} "
            f"| {'yes' if r['meets'] else 'no'} | {missed_on(r)} "
            f"| {stick(r)} "
            f"| {r['state_novelty']:.3f} | {r['state_distance']:.4f} |"
        )
    lines += [
        "",
        "Return ratio: deterministic return (10 episodes, seeds 0-9) / the median of the population's "
        "references' returns in the same evaluation. Nearest / r0: the distance to the nearest policy the "
        f"policy had to avoid / r0_default. Meets: return ratio >= {RETURN_RATIO} and nearest / r0 >= 1. State "
        "novelty: sliced-Wasserstein distance between visited states to the nearest reference; state distance: MMD to "
        "the nearest avoided policy. Missed on: the criterion a policy missed. More different than: how many of "
        "the references are nearer to their own nearest other reference (a yardstick, not a criterion). Mean +- "
        "std over policies, IQM with a 95% percentile-bootstrap CI.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--out", required=True, help="the Markdown table")
    parser.add_argument("--json", default=None, help="every row as JSON")
    parser.add_argument("--title", default="Novel and good on every task")
    parser.add_argument("--beside", default=None, metavar="EVALUATION_JSON", help="the paper campaign's evaluation")
    args = parser.parse_args(argv)
    runs = population_runs(args.runs)
    rows, docs = measure(runs)
    command = "python benchmarks/novel_everywhere/measure.py " + " ".join(args.runs) + f" --out {args.out}"
    command += f" --beside {args.beside}" if args.beside else ""
    text = report(rows, args.title, command)
    described = descriptor_section(rows)
    if described:
        text += "\n".join(["", *described, ""])
    states = state_section(rows)
    if states:
        text += "\n".join(["", *states, ""])
    slots = candidate_slots(runs)
    if slots:
        text += "\n".join(["", *candidates_section(slots, rows), ""])
    if args.beside:
        text += "\n".join(["", *beside(runs, docs, args.beside), ""])
    atomic_write_text(args.out, text)
    if args.json:
        atomic_write_json(args.json, {"command": command, "rows": rows, "candidates": slots})
    print(f"{len(rows)} novel policies measured: {args.out}")


if __name__ == "__main__":
    main()
