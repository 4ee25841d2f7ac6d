"""`npsco report`: evaluations of population runs -> a Markdown and HTML report with the paper's Table 1, Figs. 2-4,
training curves, behaviour filmstrips, per-policy results, and the configuration and commands behind every number.

The data steps are pure functions of the evaluation rows (`npsco.report.data`: `table1_blocks`, `fig2_panels`,
`fig3_data`, ...; `npsco.report.provenance`: `population_command`, ...); `build_report` runs them, renders the figures
and writes the files:

    OUT/report.md, OUT/report.html     the report (the HTML embeds its images, the Markdown links them)
    OUT/figures/*.png                  the figures; OUT/figures/behaviour/*.png the filmstrips, *.mp4 (or .gif) videos
    OUT/evaluation.csv, .json          every policy once (all runs together) and the statistics of the tables
    OUT/distances_TASK.csv             the action distance between every pair of a task's policies (the heatmap)
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import gymnasium as gym
import numpy as np
from matplotlib.figure import Figure

from npsco.errors import NpscoError
from npsco.evaluation.evaluate import combine, evaluate_runs
from npsco.evaluation.measure import FIG2_START, MeasureCache
from npsco.evaluation.rows import group_sort_key, rows_to_csv
from npsco.io import atomic_write_json, atomic_write_text, read_json
from npsco.manifest import load_manifest
from npsco.policy import load_policy
from npsco.report.behaviour import default_clip, default_sampling, episode_frames, filmstrip_image, save_image
from npsco.report.data import (
    curve_data,
    fig2_goals,
    fig2_panels,
    fig3_data,
    fig4_data,
    fmt,
    groups_of,
    novelty_table,
    policy_table,
    table1_blocks,
    tasks_of,
)
from npsco.report.distances import task_distances
from npsco.report.document import Block, Code, Heading, Image, Items, Paragraph, Row, Table, Video, to_html, to_markdown
from npsco.report.figures import (
    distance_heatmap_figure,
    learning_curves_figure,
    maze_trajectories_figure,
    novelty_reward_figure,
    save_figure,
    threshold_ablation_figure,
)
from npsco.report.provenance import package_versions, population_command, portable, relative_command, shown
from npsco.report.video import resolve_format, save_video


def _figure(fig: Figure, out: Path, name: str) -> str:
    save_figure(fig, out / "figures" / name, dpi=110)
    return f"figures/{name}"


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def behaviour_blocks(
    rows: list[dict], out: Path, seed: int, videos: str | None, limit: int | None, log: Callable[[str], None]
) -> list[Block]:
    """Per policy, one deterministic episode (the maze from the Fig. 2 start): a video (`videos`: `auto`, `mp4` or
    `gif`; None for none) next to a filmstrip, grouped by task and method. A task that cannot render gets a note."""
    blocks: list[Block] = []
    chosen = sorted(rows, key=lambda r: (r["task"], group_sort_key(r["group"]), r["name"]))[:limit]
    if not chosen:
        return [Paragraph("No filmstrips (`--no-filmstrips`, or `--max-filmstrips 0`).")]
    video_format = resolve_format(videos) if videos else None
    for task in tasks_of(chosen):
        try:
            blocks += _task_behaviour(task, [r for r in chosen if r["task"] == task], out, seed, video_format, log)
        except (NpscoError, gym.error.Error, ImportError, RuntimeError, OSError) as e:
            # a task that cannot render (no rgb_array mode, a missing dependency, no OpenGL): the report goes on
            log(f"  no pictures of {task}: {type(e).__name__}: {e}")
            blocks.append(
                Paragraph(
                    f"No pictures of {task}: rendering failed ({type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200] if str(e) else ''})."
                )
            )
    if limit is not None and len(rows) > limit:
        blocks.append(
            Paragraph(f"Filmstrips of {len(rows) - limit} more policies omitted (`--max-filmstrips {limit}`).")
        )
    return blocks


def _task_behaviour(
    task: str, rows: list[dict], out: Path, seed: int, video_format: str | None, log: Callable[[str], None]
) -> list[Block]:
    """The filmstrips (and videos, in `video_format`) of one task's policies, grouped by method."""
    blocks: list[Block] = []
    for g in groups_of(rows):
        blocks.append(Heading(f"{task}: {g}", 3))
        for r in [r for r in rows if r["group"] == g]:
            policy = load_policy(r["checkpoint"])
            env_id = policy.metadata["env_id"]
            maze = r.get("goal_from_right") is not None
            start = FIG2_START if maze else None
            n_frames, every = default_sampling(env_id)
            clip_every, fps = default_clip(env_id)
            log(f"  filmstrip{' and video' if video_format else ''} {task} {r['name']}")
            frames = episode_frames(
                policy, n_frames, every, seed=seed, start=start, clip_every=clip_every if video_format else None
            )
            # the stem keeps its dots (a chain at r0 x 0.5): the suffix is appended, not put in place of a "suffix"
            stem = out / "figures" / "behaviour" / _safe(f"{task}__{Path(r['run']).name}__{r['name']}")
            columns = -(-n_frames // 2) if video_format else n_frames  # two rows beside a video: neither is tiny
            path = save_image(filmstrip_image(frames, columns=columns), stem.with_name(f"{stem.name}.png"))
            where = f"from {FIG2_START}" if maze else f"env seed {seed}"
            end = f", episode ended at step {frames.steps[-1]}" if frames.ended else ""
            caption = (
                f"{r['name']} (seed {r['seed']}): steps {', '.join(map(str, frames.steps))} of a "
                f"deterministic episode {where}{end}; return up to step {frames.steps[-1]}: "
                f"{fmt(frames.episode_return)}."
            )
            strip = Image(str(path.relative_to(out)), f"filmstrip of {r['name']}")
            if video_format:
                video = save_video(frames.clip, stem, fps=fps, fmt=video_format)
                caption += (
                    f" Video: steps 0..{frames.clip_steps[-1]}, every {clip_every} "
                    f"step{'s' if clip_every > 1 else ''}, {fps:g} frames/s."
                )
                blocks.append(Row([Video(str(video.relative_to(out)), f"video of {r['name']}"), strip], caption))
            else:
                blocks.append(Image(strip.path, strip.alt, caption))
    return blocks


def distance_blocks(
    rows: list[dict],
    docs: list[dict],
    configs: dict[str, dict],
    out: Path,
    cache: MeasureCache,
    log: Callable[[str], None],
) -> list[Block]:
    """Per task, the heatmap of the action distance between every pair of its policies (and its CSV)."""
    blocks: list[Block] = [
        Heading("Who is near whom: action distances"),
        Paragraph(
            "D(row, column): the mean distance between the two policies' executed deterministic actions on the "
            "states the row's policy visits in its evaluation episodes (the distance behind novelty; not "
            "symmetric). Policies are ordered by method and chain; white lines separate the methods. A dark "
            "row is a policy that acts like the others where it goes; a novel policy should be far (bright) "
            "from the PPO references and from the policies before it in its chain."
        ),
    ]
    for task in tasks_of(rows):
        d = task_distances(task, rows, docs, configs, cache, log)
        if len(d.labels) < 2:
            continue
        name = f"distances_{_safe(task)}"
        fig = distance_heatmap_figure(d.matrix, d.labels, d.groups, title=f"{task}: D(row, column)")
        lines = ["policy,group," + ",".join(d.labels)]
        lines += [
            f"{a},{g}," + ",".join("" if not np.isfinite(v) else repr(round(float(v), 6)) for v in row)
            for a, g, row in zip(d.labels, d.groups, d.matrix, strict=True)
        ]
        atomic_write_text(out / f"{name}.csv", "\n".join(lines) + "\n")
        blocks.append(
            Image(
                _figure(fig, out, f"{name}.png"),
                f"action distances {task}",
                f"{task}: action distance between all {len(d.labels)} policies (`{name}.csv`).",
            )
        )
    return blocks


def _config(run: str) -> dict:
    """A run's config.json ({} when it has none)."""
    path = Path(run) / "config.json"
    return read_json(path) if path.exists() else {}


def trained_members(run: str | Path) -> int:
    """How many policies of a population run have finished training (its manifest says so)."""
    return sum(m.get("status") == "done" for m in load_manifest(run).get("members", []))


def build_report(
    runs: Sequence[str | Path],
    out: str | Path,
    episodes: int | None = None,
    seed: int = 0,
    reuse: bool = True,
    filmstrips: bool = True,
    videos: str | None = "auto",
    max_filmstrips: int | None = None,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Evaluate `runs` (reusing up-to-date evaluations) and write the report into `out`; returns report.md's path.

    `videos`: `auto` (MP4 when imageio-ffmpeg is installed, else GIF), `mp4`, `gif`, or None for none."""
    out = Path(out)
    untrained = [str(r) for r in runs if not trained_members(r)]
    runs = [r for r in runs if str(r) not in untrained]
    if not runs:
        raise NpscoError("no trained policy in the runs given: nothing to report")
    if videos:
        resolve_format(videos)  # an impossible format is refused before any evaluation
    cache: MeasureCache = {}
    docs = [portable(d) for d in evaluate_runs(runs, episodes, seed, reuse=reuse, write=True, log=log, cache=cache)]
    configs = {d["run"]: _config(d["run"]) for d in docs}  # each run's config.json, read once
    combined = combine(docs)
    rows, stats = combined["policies"], combined["statistics"]
    log(f"writing the report into {out}")
    command = relative_command(
        command or "npsco report " + " ".join(shlex.quote(str(r)) for r in runs) + f" --out {shlex.quote(str(out))}"
    )

    blocks: list[Block] = [
        Heading("npsco report", 1),
        Paragraph(
            f"Generated {datetime.now(UTC).isoformat(timespec='seconds')} by "
            f"`{command}`, from {len(docs)} population run(s) with {len(rows)} policies: "
            + ", ".join(f"`{d['run']}`" for d in docs)
            + ". Paths here are relative to the folder the report "
            "was made in, so the report and its runs can move together."
        ),
    ]
    # each run by its path: the runs of a sweep share their names (`ipd`) across tasks
    pending = [f"`{d['run']}`: {', '.join(d['pending'])}" for d in docs if d.get("pending")]
    pending += [f"`{shown(r)}`: every policy" for r in untrained]
    if pending:
        blocks.append(Paragraph("Not yet trained (left out): " + "; ".join(pending) + "."))

    blocks += [
        Heading("Table 1: reward, success rate and relative novelty"),
        Paragraph(
            "Reward: deterministic return of each policy (mean over its evaluation episodes), then mean ± "
            "std over the policies of a method (population std, as the paper). The baseline of both "
            "success rates is the median evaluated return of the PPO references. Success (paper: during "
            "training), the paper's Sec. 4.2: a policy succeeds when it reached the baseline at some "
            "evaluation during its training; a PPO reference is scored on its evaluated return, so PPO's "
            "rate is about 0.5 by definition. Success (final policy): every policy, the references "
            "included, scored alike on its evaluated return. Relative novelty (paper): novelty divided by "
            "the mean novelty of the PPO references, each one's distance to its nearest other reference "
            "(PPO's mean is 1); relative novelty (/ PPO pairwise distance): divided by the mean distance "
            "between two PPO references (1 = as different as two PPO seeds on average). Rows: `ppo` are "
            "the PPO references; a chain trained at a multiple S of the default threshold is "
            "`METHOD-r0xS`."
        ),
        *table1_blocks(stats),
    ]

    blocks += [
        Heading("Novelty"),
        Paragraph(
            "Novelty of a policy: min over the PPO references of D(policy, reference), the mean distance "
            "between their executed deterministic actions on the states the policy visits (for a "
            "reference: against the other references). Relative novelty (paper) divides it by the mean "
            "novelty of the PPO references; relative novelty (/ pairwise) by the mean distance between "
            "PPO references (1 = as different as two PPO seeds). State novelty: min "
            "over the references of the sliced-Wasserstein distance between the visited-state "
            "distributions (standardised states): do the policies go to different places?"
        ),
        novelty_table(stats),
    ]

    blocks += distance_blocks(rows, docs, configs, out, cache, log)

    blocks.append(Heading("Fig. 2: Four Reward Maze trajectories"))
    panels = fig2_panels(rows)
    if panels:
        maze_rows = [r for r in rows if r.get("goal_from_right")]
        blocks += [
            Image(
                _figure(maze_trajectories_figure(panels), out, "fig2_maze_trajectories.png"),
                "Fig. 2",
                f"One deterministic episode of every policy from {FIG2_START}, near the right "
                "edge; one panel per method, PPO references included. Regions: top +5, bottom +5, left +10, "
                "right +1.",
            ),
            fig2_goals(maze_rows),
        ]
    else:
        blocks.append(Paragraph("No Four Reward Maze run among the runs given: nothing to draw."))

    blocks.append(Heading("Fig. 3: relative novelty and reward"))
    data3 = fig3_data(rows)
    if data3:
        blocks.append(
            Image(
                _figure(novelty_reward_figure(data3), out, "fig3_novelty_reward.png"),
                "Fig. 3",
                "Each policy is a faint point; each method's mean ± std is a bold marker with error bars. "
                "Relative novelty as the paper's Fig. 3: novelty / the PPO references' mean novelty (each "
                "reference's distance to its nearest other reference), so PPO's mean is 1 (dashed line). "
                "Table 1 also gives it / the mean pairwise distance.",
            )
        )
    else:
        blocks.append(Paragraph("No relative novelty could be measured (it needs at least 2 PPO references)."))

    blocks.append(Heading("Fig. 4: threshold ablation"))
    data4 = fig4_data(rows)
    if data4:
        blocks.append(
            Image(
                _figure(threshold_ablation_figure(data4), out, "fig4_threshold_ablation.png"),
                "Fig. 4",
                "Returns of chains trained at different multiples of the default threshold r0 (box: "
                "quartiles and median; whiskers: 1.5 IQR; points: beyond), PPO references in grey.",
            )
        )
    else:
        blocks.append(
            Paragraph(
                "Nothing to ablate: no method was trained at two or more thresholds. Train a "
                "population with e.g. `--r0-scale 0.5 1 2` and give its run to `npsco report`."
            )
        )

    blocks.append(Heading("Training curves"))
    for t in tasks_of(rows):
        curves = curve_data(rows, t)
        if curves:
            fig = learning_curves_figure(curves, ylabel=f"{t}: evaluation return")
            blocks.append(
                Image(
                    _figure(fig, out, f"curves_{_safe(t)}.png"),
                    f"training curves {t}",
                    f"{t}: deterministic evaluation return during training, per policy, bold mean per method.",
                )
            )

    blocks.append(Heading("Behaviour"))
    blocks.append(
        Paragraph(
            "Frames of one deterministic episode per policy, side by side (appendix D's pictures), "
            "and a short video of the same episode; MuJoCo rendered offscreen, the maze by its own "
            "renderer (dark line: the path so far)."
        )
    )
    blocks += behaviour_blocks(rows, out, seed, videos, max_filmstrips if filmstrips else 0, log)

    blocks += [
        Heading("Per-policy results"),
        policy_table(rows),
        Paragraph(
            "All columns, and the full action-distance and state-diversity matrices, are in "
            "`evaluation.csv` / `evaluation.json` here and in each run's `evaluation/` folder."
        ),
    ]

    versions = package_versions()
    blocks += [
        Heading("Configuration and commands"),
        Table(header=["package", "version"], rows=[[k, v] for k, v in versions.items()], align="ll"),
        Paragraph("Commands that produced these numbers (training, then evaluation, then this report):"),
    ]
    commands = [relative_command(population_command(d["run"], configs[d["run"]])) for d in docs]
    commands += [d["command"] for d in docs]
    commands.append(command)
    blocks.append(Code("\n".join(commands), "bash"))
    for d in docs:
        config = dict(configs[d["run"]])
        if config:
            for key in ("refs_from", "ref_checkpoints"):  # borrowed references: shown relative, as every path here
                if config.get(key):
                    config[key] = shown(config[key]) if isinstance(config[key], str) else list(map(shown, config[key]))
            blocks += [
                Paragraph(f"`{Path(d['run']) / 'config.json'}` (its paths relative):"),
                Code(json.dumps(config, indent=2), "json"),
            ]
        settings = ", ".join(f"{k} {v}" for k, v in d["settings"].items())
        blocks.append(Items([f"evaluation of `{d['run']}`: {settings}; fingerprint {d['fingerprint']}"]))

    atomic_write_text(out / "evaluation.csv", rows_to_csv(rows))
    atomic_write_json(out / "evaluation.json", {**combined, "versions": versions, "commands": commands})
    atomic_write_text(out / "report.md", to_markdown(blocks))
    atomic_write_text(out / "report.html", to_html(blocks, "npsco report", out))
    return out / "report.md"
