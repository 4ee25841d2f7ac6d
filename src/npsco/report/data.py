"""The report's data steps: pure functions of the evaluation rows (and statistics) that make its tables (Table 1, the
novelty table, per-policy results) and the data of its figures (Figs. 2-4, training curves); the numbers' formatting.
`npsco.report.build` draws and writes them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from npsco.evaluation.rows import group_sort_key
from npsco.report.document import Block, Paragraph, Table
from npsco.tasks import MAZE_ID, task_name


# -------------------------------------------------------------------------------------------------- formatting
def fmt(x: float | None, digits: int | None = None) -> str:
    """A number with as many decimals as its size deserves (returns of 2000 and of 9.9 both read well)."""
    if x is None or not np.isfinite(x):
        return "–"
    if digits is None:
        digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
    return f"{x:.{digits}f}"


def pm(summary: dict | None) -> str:
    return "–" if not summary else f"{fmt(summary['mean'])} ± {fmt(summary['std'])}"


def iqm_ci(summary: dict | None) -> str:
    return (
        "–" if not summary else f"{fmt(summary['iqm'])} [{fmt(summary['iqm_ci_low'])}, {fmt(summary['iqm_ci_high'])}]"
    )


def tasks_of(rows: list[dict]) -> list[str]:
    """The tasks of `rows` (or of statistics, which name their task too), the maze first."""
    maze = task_name(MAZE_ID)
    return sorted({r["task"] for r in rows}, key=lambda t: (t != maze, t))


def groups_of(rows: list[dict]) -> list[str]:
    """The groups (methods, chains) of `rows` (or of statistics), PPO first."""
    return sorted({r["group"] for r in rows}, key=group_sort_key)


# ------------------------------------------------------------------------------------------------------ tables
TABLE1_HEADER = [
    "Task",
    "Method",
    "policies",
    "reward",
    "success (paper: during training)",
    "success (final policy)",
    "relative novelty (paper: / PPO novelty)",
    "relative novelty (/ PPO pairwise distance)",
]
"""Table 1's columns; the paper's own definitions are labelled `paper` (docs/report.md)."""


def rate(value: float | None) -> str:
    return "–" if value is None else fmt(value, 2)


def table1_blocks(stats: dict) -> list[Block]:
    """Table 1 (per task and method: reward mean ± std, both success rates, both relative novelties) and its IQM
    [95% CI] companion."""
    cells = {(s["group"], s["task"]): s for s in stats["per_task"]}
    tasks, groups = tasks_of(stats["per_task"]), groups_of(stats["per_task"])
    main = Table(header=TABLE1_HEADER, rows=[], align="llrrrrrr", name="table1", nowrap=(0, 1, 3))
    for t in tasks:
        for g in groups:
            c = cells.get((g, t))
            if c:
                main.rows.append(
                    [
                        t,
                        g,
                        str(c["n"]),
                        pm(c["return"]),
                        rate(c["success_rate"]),
                        rate(c.get("success_rate_final")),
                        pm(c.get("relative_novelty_paper")),
                        pm(c["relative_novelty"]),
                    ]
                )
    robust = Table(
        header=["Method", *[f"{t} reward IQM [95% CI]" for t in tasks], "normalised IQM [95% CI]", "policies"],
        rows=[],
        name="table1_iqm",
        nowrap=(0,),
    )
    aggregate = {a["group"]: a for a in stats["aggregate"]}
    for g in groups:
        per = [cells.get((g, t)) for t in tasks]
        a = aggregate.get(g)
        norm = f"{fmt(a['normalized_return_iqm'], 2)} [{fmt(a['ci_low'], 2)}, {fmt(a['ci_high'], 2)}]" if a else "–"
        robust.rows.append(
            [
                g,
                *[iqm_ci(c["return"]) if c else "–" for c in per],
                norm,
                " / ".join(str(c["n"]) if c else "0" for c in per),
            ]
        )
    return [
        main,
        Paragraph(
            "Interquartile mean (IQM) of the policies' returns with 95% bootstrap confidence "
            "intervals (percentile, 2000 resamples); the normalised column pools all tasks, each "
            "return divided by its task's success baseline (median PPO return), with a stratified "
            "bootstrap over tasks."
        ),
        robust,
    ]


def novelty_table(stats: dict) -> Table:
    table = Table(
        header=[
            "Method",
            "Task",
            "policies",
            "relative novelty (paper)",
            "relative novelty (paper) IQM [95% CI]",
            "relative novelty (/ pairwise)",
            "state novelty",
        ],
        rows=[],
        align="llrrrrr",
        name="novelty",
        nowrap=(0, 1),
    )
    for s in stats["per_task"]:
        table.rows.append(
            [
                s["group"],
                s["task"],
                str(s["n"]),
                pm(s.get("relative_novelty_paper")),
                iqm_ci(s.get("relative_novelty_paper")),
                pm(s["relative_novelty"]),
                pm(s["state_novelty"]),
            ]
        )
    return table


def goals_text(row: dict) -> str:
    """Maze: the goals the policy reaches from random starts, most frequent first (e.g. `left 97%, top 3%`)."""
    shares = [(g, row.get(f"goal_{g}")) for g in ("top", "bottom", "left", "right", "none")]
    reached = sorted([(g, float(s)) for g, s in shares if s], key=lambda gs: -gs[1])
    return ", ".join(f"{g} {100 * s:.0f}%" for g, s in reached) or "–"


def policy_table(rows: list[dict], name: str | None = None) -> Table:
    """Every policy of `rows`: return, novelties, best training evaluation, successes and (maze) goals; `name`: the
    file stem of its CSV and LaTeX copies."""
    maze = any(r.get("goal_from_right") is not None for r in rows)
    header = [
        "Policy",
        "Method",
        "Task",
        "seed",
        "return",
        "novelty",
        "relative novelty (paper)",
        "relative novelty (/ pairwise)",
        "state novelty",
        "best training eval",
        "success (paper)",
        "success (final)",
    ] + (["goal from (14.5, 8)", "goals (random starts)"] if maze else [])
    table = Table(
        header=header, rows=[], align="lllr" + "r" * 6 + "ll" + ("ll" if maze else ""), name=name, nowrap=(0, 1, 2)
    )
    yes_no = {True: "yes", False: "no", None: "–"}
    for r in sorted(rows, key=lambda r: (group_sort_key(r["group"]), r["task"], r["name"])):
        line = [
            f"{Path(r['run']).name}:{r['name']}",
            r["group"],
            r["task"],
            str(r["seed"]),
            f"{fmt(r['return_mean'])} ± {fmt(r['return_std'])}",
            fmt(r["novelty"], 3),
            fmt(r.get("relative_novelty_paper")),
            fmt(r["relative_novelty"]),
            fmt(r["state_novelty"]),
            fmt(r["best_training_eval"]),
            yes_no[r["success"]],
            yes_no[r.get("success_final")],
        ]
        if maze:
            line += [r.get("goal_from_right") or "–", goals_text(r) if r.get("goal_from_right") else "–"]
        table.rows.append(line)
    return table


# ----------------------------------------------------------------------------------------------- figure data
def fig2_panels(rows: list[dict]) -> dict[str, list[np.ndarray]]:
    """Fig. 2: per group (PPO references included), the maze trajectories from `FIG2_START`, in policy order."""
    panels: dict[str, list[np.ndarray]] = {}
    for g in groups_of(rows):
        trajectories = [np.asarray(r["fig2_trajectory"]) for r in rows if r["group"] == g and r.get("fig2_trajectory")]
        if trajectories:
            panels[g] = trajectories
    return panels


def fig2_goals(rows: list[dict]) -> Table:
    """Which goal each policy of each group reaches from the Fig. 2 start, and how many distinct goals."""
    table = Table(
        header=["Method", "goal of each policy from (14.5, 8)", "distinct goals"],
        rows=[],
        align="llr",
        name="maze_goals",
        nowrap=(0,),
    )
    for g in groups_of(rows):
        goals = [r["goal_from_right"] for r in rows if r["group"] == g and r.get("goal_from_right")]
        if goals:
            table.rows.append([g, ", ".join(goals), str(len(set(goals) - {"none"}))])
    return table


def fig3_data(rows: list[dict]) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Fig. 3: data[task][group] = (relative novelties, returns) of the policies with a relative novelty, in the
    paper's normalisation (`relative_novelty_paper`: / the PPO references' mean novelty, as the paper's Fig. 3)."""
    data: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for t in tasks_of(rows):
        for g in groups_of(rows):
            sel = [r for r in rows if r["task"] == t and r["group"] == g and r["relative_novelty_paper"] is not None]
            if sel:
                data.setdefault(t, {})[g] = (
                    np.array([r["relative_novelty_paper"] for r in sel]),
                    np.array([r["return_mean"] for r in sel]),
                )
    return data


def fig4_data(rows: list[dict]) -> dict[str, dict[str, np.ndarray]]:
    """Fig. 4: data[task][label] = returns of a method's policies trained at different multiples S of the default r0
    (the rows' `r0_scale`: chains `METHOD-r0xS`, and 1 for a plain chain at the default threshold), labelled `Sx`
    (`METHOD Sx` when several methods were ablated), with the PPO references as `PPO`. Empty when no method was
    trained at two or more thresholds."""
    data: dict[str, dict[str, np.ndarray]] = {}
    for t in tasks_of(rows):
        scaled = [r for r in rows if r["task"] == t and r["role"] != "reference" and r.get("r0_scale")]
        by_method: dict[str, dict[float, list[float]]] = {}
        for r in scaled:
            by_method.setdefault(r["method"], {}).setdefault(r["r0_scale"], []).append(r["return_mean"])
        by_method = {m: s for m, s in by_method.items() if len(s) >= 2}
        if not by_method:
            continue
        panel: dict[str, np.ndarray] = {}
        refs = [r["return_mean"] for r in rows if r["task"] == t and r["role"] == "reference"]
        if refs:
            panel["PPO"] = np.array(refs)
        for m in sorted(by_method, key=group_sort_key):
            for scale in sorted(by_method[m]):
                label = f"{scale:g}x" if len(by_method) == 1 else f"{m} {scale:g}x"
                panel[label] = np.array(by_method[m][scale])
        data[t] = panel
    return data


def curve_data(rows: list[dict], task: str) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """Training curves of a task: per group, the (steps, evaluation return) of each policy that has one."""
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for g in groups_of(rows):
        for r in rows:
            curve = np.asarray(r.get("eval_curve") or [], dtype=float)
            if r["task"] == task and r["group"] == g and len(curve) and np.all(np.diff(curve[:, 0]) > 0):
                curves.setdefault(g, []).append((curve[:, 0], curve[:, 1]))
    return curves
