"""`npsco report`: evaluations of population runs -> a Markdown and HTML report with the paper's Table 1, Figs. 2-4,
training curves, behaviour filmstrips, per-policy results, and the configuration and commands behind every number.

The data steps are pure functions of the evaluation rows (`npsco.report.data`: `table1_blocks`, `fig2_panels`,
`fig3_data`, ...; `npsco.report.provenance`: `population_command`, ...); `build_report` runs them, renders the figures
and writes the files:

    OUT/report.md, OUT/report.html     the report (the HTML embeds its images, the Markdown links them)
    OUT/figures/*.png, .svg, .pdf      the figures; OUT/figures/behaviour/*.png the filmstrips, *.mp4 (or .gif) the
                                       population videos
    OUT/TABLE.csv, OUT/TABLE.tex       every table of the report as CSV and as a LaTeX tabular
    OUT/evaluation.csv, .json          every policy once (all runs together) and the statistics of the tables
    OUT/distances_TASK.csv             the action distance between every pair of a task's policies (the heatmap)
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import gymnasium as gym
import numpy as np
from matplotlib.figure import Figure

from npsco.errors import NpscoError
from npsco.evaluation import descriptors
from npsco.evaluation.evaluate import combine, evaluate_runs
from npsco.evaluation.measure import FIG2_START, MeasureCache
from npsco.evaluation.rows import group_sort_key, rows_to_csv
from npsco.filecheck import POPULATION_CONFIG, read_checked
from npsco.io import atomic_write_json, atomic_write_text, run_entries
from npsco.layout import CONFIG_FILE, EVALUATION_FILE, EVALUATION_FOLDER, EVALUATION_TABLE, REPORT_MARKER
from npsco.manifest import load_manifest
from npsco.paths import output_folder, recorded_run
from npsco.policy import load_policy
from npsco.ppo.config import eval_period
from npsco.report.behaviour import (
    REPORT_FRAME,
    Frames,
    clip_fps,
    default_frames,
    episode_frames,
    filmstrip_image,
    save_image,
)
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
from npsco.report.document import (
    Block,
    Code,
    Contents,
    Details,
    Heading,
    Image,
    Items,
    Paragraph,
    Table,
    Video,
    csv_text,
    latex_text,
    tables,
    to_html,
    to_markdown,
)
from npsco.report.figures import (
    body_trajectories_figure,
    distance_heatmap_figure,
    learning_curves_figure,
    maze_trajectories_figure,
    novelty_reward_figure,
    save_figure,
    threshold_ablation_figure,
)
from npsco.report.provenance import package_versions, population_command, portable, relative_command, shown
from npsco.report.video import Tile, grid_frames, resolve_format, save_video
from npsco.selection import RETURN_RATIO

FIGURE_FORMATS = ("png", "svg", "pdf")
"""Every figure is written in these formats; the report shows the PNG and links the others."""


def _figure(fig: Figure, out: Path, name: str, alt: str, caption: str) -> Image:
    """Save `fig` as `figures/NAME.png`, `.svg` and `.pdf`; the report's image of it."""
    paths = [f"figures/{name}.{fmt}" for fmt in FIGURE_FORMATS]
    for path in paths:
        save_figure(fig, out / path, dpi=110)
    return Image(paths[0], alt, caption, also=paths[1:])


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def behaviour_blocks(
    rows: list[dict], out: Path, seed: int, videos: str | None, limit: int | None, log: Callable[[str], None]
) -> list[Block]:
    """The Behaviour section: per task (a section), the trajectories of the body (MuJoCo), then per method (a closed
    section) a population video (`videos`: `auto`, `mp4` or `gif`; None for none) and a filmstrip per policy, all of
    one deterministic episode per policy (the maze from the Fig. 2 start). A task that cannot render gets a note.
    Nothing when no policy is rendered (`limit` 0)."""
    chosen = sorted(rows, key=lambda r: (r["task"], group_sort_key(r["group"]), r["name"]))[:limit]
    if not chosen:
        return []
    video_format = resolve_format(videos) if videos else None
    blocks: list[Block] = [
        Heading("Behaviour"),
        Paragraph(
            "One deterministic episode per policy, filmed whole: the filmstrip's frames are spread evenly over the "
            "episode, its first and final state included, and the population video of each method plays the "
            "episodes of all its policies and the PPO references side by side, in step (a tile that ended stays on "
            "its last frame). MuJoCo is rendered offscreen by a camera that follows the body at the task's own "
            "viewing distance and height; the maze by its own renderer (dark line: the path so far)."
        ),
    ]
    for task in tasks_of(chosen):
        task_rows = [r for r in chosen if r["task"] == task]
        try:
            inner = _task_behaviour(task, task_rows, out, seed, video_format, log)
        except (NpscoError, gym.error.Error, ImportError, RuntimeError, OSError) as e:
            # a task that cannot render (no rgb_array mode, a missing dependency, no OpenGL): the report goes on
            log(f"  no pictures of {task}: {type(e).__name__}: {e}")
            first = str(e).splitlines()[0][:200] if str(e) else ""
            inner = [Paragraph(f"No pictures of {task}: rendering failed ({type(e).__name__}: {first}).")]
        blocks.append(Details(Heading(task, 3), inner, f"{len(task_rows)} policies", open=True))
    if limit is not None and len(rows) > limit:
        blocks.append(Paragraph(f"{len(rows) - limit} more policies not filmed (`--max-filmstrips {limit}`)."))
    return blocks


def _film(row: dict, seed: int, video: bool, log: Callable[[str], None]) -> Frames:
    """One deterministic episode of the row's policy, filmed (and, with `video`, its video frames)."""
    policy = load_policy(row["checkpoint"])
    start = FIG2_START if row.get("goal_from_right") is not None else None
    log(f"  filming {row['task']} {row['name']}")
    return episode_frames(
        policy, default_frames(policy.metadata["env_id"]), seed=seed, start=start, size=REPORT_FRAME, video=video
    )


def _strip_caption(row: dict, frames: Frames, seed: int) -> str:
    where = f"from {FIG2_START}" if row.get("goal_from_right") is not None else f"on env seed {seed}"
    how = "fell" if frames.terminated else "ended" if frames.ended else "cut"
    return (
        f"{row['name']} (seed {row['seed']}): steps {', '.join(map(str, frames.steps))} of a deterministic "
        f"episode {where}, which {how} at step {frames.length}; return {fmt(frames.episode_return)}."
    )


def _tile_label(row: dict) -> str:
    """A policy's name in a population video's tile: `ref0`, or its place in its chain (`k0`)."""
    return str(row["name"]).split("/")[-1]


def _task_behaviour(
    task: str, rows: list[dict], out: Path, seed: int, video_format: str | None, log: Callable[[str], None]
) -> list[Block]:
    """One task's behaviour pictures: the body's trajectories, then per method its population video and filmstrips."""
    films = {r["name"]: _film(r, seed, video_format is not None, log) for r in rows}
    blocks: list[Block] = []
    tracks: dict[str, list[tuple[str, np.ndarray]]] = {}
    for r in rows:
        body = films[r["name"]].body
        if body is not None:
            tracks.setdefault(r["group"], []).append((_tile_label(r), body))
    if tracks:
        fig = body_trajectories_figure(tracks, title=f"{task}: root body (torso) over one episode")
        caption = (
            f"{task}: x position (where the policy goes) and height (how it moves up and down) of the body the "
            "camera follows, over the filmed episode of every policy, one panel per method; a dot marks where the "
            "episode ended."
        )
        blocks.append(_figure(fig, out, f"trajectories_{_safe(task)}", f"trajectories {task}", caption))
    references = [r for r in rows if r["role"] == "reference"]
    for g in groups_of(rows):
        members = [r for r in rows if r["group"] == g]
        inner: list[Block] = []
        if video_format:
            tiled = members if g == "ppo" else references + [r for r in members if r["role"] != "reference"]
            inner.append(_population_video(task, g, tiled, films, out, video_format))
        for r in members:
            stem = _safe(f"{task}__{Path(r['run']).name}__{r['name']}")
            path = save_image(filmstrip_image(films[r["name"]]), out / "figures" / "behaviour" / f"{stem}.png")
            caption = _strip_caption(r, films[r["name"]], seed)
            inner.append(Image(str(path.relative_to(out)), f"filmstrip of {r['name']}", caption))
        what = "population video and filmstrips" if video_format else "filmstrips"
        blocks.append(Details(Heading(f"{task}: {g}", 4), inner, f"{len(members)} policies: {what}"))
    return blocks


def _population_video(
    task: str, group: str, rows: list[dict], films: dict[str, Frames], out: Path, video_format: str
) -> Video:
    """The episodes of `rows`' policies side by side in one video (`grid_frames`), in `video_format`."""
    tiles = [
        Tile(_tile_label(r), films[r["name"]].clip, films[r["name"]].clip_steps, films[r["name"]].ended) for r in rows
    ]
    every, fps = films[rows[0]["name"]].clip_every, clip_fps(rows[0]["env"])
    stem = out / "figures" / "behaviour" / _safe(f"{task}__population__{group}")
    path = save_video(grid_frames(tiles), stem, fps=fps, fmt=video_format)
    who = "its policies" if group == "ppo" else "the PPO references (`ref`) and its policies (`k0`, `k1`, ...)"
    return Video(
        str(path.relative_to(out)),
        f"population video {task} {group}",
        f"{task}, {group}: one deterministic episode of each of {who}, side by side in step: a frame every {every} "
        f"step{'s' if every > 1 else ''}, {fps:g} frames/s; a tile whose episode ended stays on its last frame "
        "(red label).",
    )


def criteria_blocks(rows: list[dict]) -> list[Block]:
    """The paper's criteria for every novel policy (return >= RETURN_RATIO x the references' median, distance to the
    nearest policy it had to avoid >= r0_default), and which candidate each is when its slot trained several."""
    novel = [r for r in rows if r.get("meets") is not None]
    if not novel:
        return []
    header = ["task", "group", "policy", "return / median", "nearest / r0", "meets", "more different than", "candidate"]
    body = [
        [
            r["task"],
            r["group"],
            r["name"],
            f"{r['return_ratio']:.2f}",
            f"{r['nearest_ratio']:.2f}",
            "yes" if r["meets"] else "no",
            f"{r['yardstick']} of {r['yardstick_of']} refs" if r.get("yardstick") is not None else "",
            f"{r['candidate']} of {r['candidates']}" if r.get("candidates") else "",
        ]
        for r in novel
    ]
    met = sum(bool(r["meets"]) for r in novel)
    return [
        Heading("The paper's criteria, per novel policy"),
        Paragraph(
            f"{met} of {len(novel)} novel policies meet both criteria: a deterministic return of at least "
            f"{RETURN_RATIO} x the median of their run's references, and a distance to the nearest policy they had to "
            "avoid (the references and the earlier policies of their chain) of at least r0_default, the paper's "
            "threshold. "
            "More different than: how many of the references are nearer to their own nearest other reference "
            "than this policy is to its nearest avoided policy (a yardstick, not a criterion). Candidate: with "
            "`--candidates`, which of the slot's candidates was kept (the others are in the manifest)."
        ),
        Table(header, body),
    ]


def descriptor_blocks(rows: list[dict]) -> list[Block]:
    """How each policy moves, on a MuJoCo locomotion task (`npsco.evaluation.descriptors`): a row per policy."""
    described = [r for r in rows if r.get("forward_speed") is not None]
    if not described:
        return []
    header = ["task", "group", "policy", *descriptors.CELLS]
    body = [[r["task"], r["group"], r["name"], *descriptors.cells(r)] for r in described]
    return [
        Heading("How the policies move"),
        Paragraph(
            "Behaviour descriptors of each policy's deterministic evaluation episodes: the root's mean forward "
            "speed, touchdowns (a foot's contact beginning) per second averaged over the feet, the torso's height "
            "and pitch (mean +- std over the steps), and the fraction of steps each foot touches the floor."
        ),
        Table(header, body),
    ]


def eval_intervals(configs: list[dict]) -> str:
    """The environment steps between two training evaluations of runs (`eval_period` iterations of `num_envs` x
    `num_steps` steps), each distinct value once (`51200`, `10240 or 51200`); empty when no run says."""
    steps = set()
    for c in configs:
        ppo = c.get("ppo") or {}
        if all(isinstance(ppo.get(k), int) for k in ("eval_every", "num_envs", "num_steps", "total_timesteps")):
            batch = ppo["num_envs"] * ppo["num_steps"]
            period = eval_period(ppo["eval_every"], ppo["total_timesteps"] // batch)
            if period:
                steps.add(period * batch)
    return " or ".join(map(str, sorted(steps)))


def distance_blocks(
    rows: list[dict],
    docs: list[dict],
    configs: dict[str, dict],
    out: Path,
    cache: MeasureCache,
    log: Callable[[str], None],
) -> list[Block]:
    """Per task (a section), the heatmap of the action distance between every pair of its policies (and its CSV);
    nothing when no task has two policies."""
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
        caption = f"{task}: action distance between all {len(d.labels)} policies (`{name}.csv`)."
        image = _figure(fig, out, name, f"action distances {task}", caption)
        blocks.append(Details(Heading(task, 3), [image], f"{len(d.labels)} policies", open=True))
    return blocks if len(blocks) > 2 else []


def _config(run: str) -> dict:
    """A run's config.json ({} when it has none), its `refs_from` absolute (a sweep's run records it relative to
    the run: `npsco.paths.recorded`)."""
    path = Path(run) / CONFIG_FILE
    config = read_checked(path, POPULATION_CONFIG) if path.exists() else {}
    if isinstance(config, dict) and isinstance(config.get("refs_from"), str) and config["refs_from"]:
        config["refs_from"] = str(recorded_run(config["refs_from"], run))
    return config


def trained_members(run: str | Path) -> int:
    """How many policies of a population run have finished training (its manifest says so)."""
    return sum(m.get("status") == "done" for m in load_manifest(run).get("members", []))


@dataclass
class Evaluated:
    """What a report is made from: the runs' evaluations, computed (or read when up to date) once."""

    runs: list[str | Path]
    """The runs given that have a trained policy."""
    untrained: list[str]
    """The runs given without one (left out of the report, named in it)."""
    docs: list[dict]
    """Each run's evaluation document, its paths relative (`portable`)."""
    configs: dict[str, dict]
    """Each run's config.json by its path ({} when it has none), read once."""
    combined: dict
    """The runs' evaluations together (`combine`): every policy's row (`policies`) and the `statistics`."""
    cache: MeasureCache
    """The episodes measured while evaluating, reused by the distance heatmaps."""

    @property
    def rows(self) -> list[dict]:
        return self.combined["policies"]

    @property
    def stats(self) -> dict:
        return self.combined["statistics"]


def report_folder(out: str | Path) -> Path:
    """`out` checked before anything is evaluated or written: a new or empty folder, or a report's (rewritten)."""
    out = output_folder(out)  # before anything is read, evaluated or written (npsco.paths)
    entries = run_entries(out) if out.is_dir() else []
    if entries and not {"report.md", REPORT_MARKER} & set(entries):  # a report's folder is rewritten, no other
        listed = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        raise NpscoError(f"{out} holds other files ({listed}) and no report.md; choose a new or empty folder for --out")
    return out


def evaluate_for_report(
    runs: Sequence[str | Path],
    episodes: int | None,
    seed: int,
    reuse: bool,
    videos: str | None,
    log: Callable[[str], None],
) -> Evaluated:
    """Evaluate the trained runs of `runs` (reusing up-to-date evaluations); refuses runs with nothing trained and an
    impossible video format before any evaluation."""
    untrained = [str(r) for r in runs if not trained_members(r)]
    trained = [r for r in runs if str(r) not in untrained]
    if not trained:
        raise NpscoError("no trained policy in the runs given: nothing to report")
    if videos:
        resolve_format(videos)  # an impossible format is refused before any evaluation
    cache: MeasureCache = {}
    docs = [portable(d) for d in evaluate_runs(trained, episodes, seed, reuse=reuse, write=True, log=log, cache=cache)]
    configs = {d["run"]: _config(d["run"]) for d in docs}
    return Evaluated(trained, untrained, docs, configs, combine(docs), cache)


def header_blocks(ev: Evaluated, command: str) -> list[Block]:
    """The title, what the report was made from and by which command, the runs left out, and the contents."""
    blocks: list[Block] = [
        Heading("npsco report", 1),
        Paragraph(
            f"Generated {datetime.now(UTC).isoformat(timespec='seconds')} by "
            f"`{command}`, from {len(ev.docs)} population run(s) with {len(ev.rows)} policies: "
            + ", ".join(f"`{d['run']}`" for d in ev.docs)
            + ". Paths here are relative to the folder the report "
            "was made in, so the report and its runs can move together."
        ),
    ]
    # each run by its path: the runs of a sweep share their names (`ipd`) across tasks
    pending = [f"`{d['run']}`: {', '.join(d['pending'])}" for d in ev.docs if d.get("pending")]
    pending += [f"`{shown(r)}`: every policy" for r in ev.untrained]
    if pending:
        blocks.append(Paragraph("Not yet trained (left out): " + "; ".join(pending) + "."))
    return [*blocks, Contents()]


def table1_section(stats: dict) -> list[Block]:
    """Table 1 of the paper: reward, the two success rates and relative novelty per method."""
    return [
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


def novelty_section(stats: dict) -> list[Block]:
    """Novelty per method: its definitions and the table."""
    return [
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


def fig2_section(rows: list[dict], out: Path) -> list[Block]:
    """Fig. 2 of the paper: the maze trajectories per method, and the goals reached; nothing without maze policies."""
    panels = fig2_panels(rows)
    if not panels:
        return []
    maze_rows = [r for r in rows if r.get("goal_from_right")]
    return [
        Heading("Fig. 2: Four Reward Maze trajectories"),
        _figure(
            maze_trajectories_figure(panels),
            out,
            "fig2_maze_trajectories",
            "Fig. 2",
            f"One deterministic episode of every policy from {FIG2_START}, near the right "
            "edge; one panel per method, PPO references included. Regions: top +5, bottom +5, left +10, "
            "right +1.",
        ),
        fig2_goals(maze_rows),
    ]


def fig3_section(rows: list[dict], out: Path) -> list[Block]:
    """Fig. 3 of the paper: relative novelty against reward, per policy and per method."""
    data3 = fig3_data(rows)
    if not data3:
        return []
    return [
        Heading("Fig. 3: relative novelty and reward"),
        _figure(
            novelty_reward_figure(data3),
            out,
            "fig3_novelty_reward",
            "Fig. 3",
            "Each policy is a faint point; each method's mean ± std is a bold marker with error bars. "
            "Relative novelty as the paper's Fig. 3: novelty / the PPO references' mean novelty (each "
            "reference's distance to its nearest other reference), so PPO's mean is 1 (dashed line). "
            "Table 1 also gives it / the mean pairwise distance.",
        ),
    ]


def fig4_section(rows: list[dict], out: Path) -> list[Block]:
    """Fig. 4 of the paper: the returns of chains trained at several threshold multiples; nothing without them."""
    data4 = fig4_data(rows)
    if not data4:
        return []
    return [
        Heading("Fig. 4: threshold ablation"),
        _figure(
            threshold_ablation_figure(data4),
            out,
            "fig4_threshold_ablation",
            "Fig. 4",
            "Returns of chains trained at different multiples of the default threshold r0 (box: "
            "quartiles and median; whiskers: 1.5 IQR; points: beyond), PPO references in grey.",
        ),
    ]


def curves_section(rows: list[dict], configs: dict[str, dict], out: Path) -> list[Block]:
    """Per task (a section), the evaluation return during training of every policy; nothing without curves."""
    curve_blocks: list[Block] = []
    for t in tasks_of(rows):
        curves = curve_data(rows, t)
        if curves:
            fig = learning_curves_figure(curves, ylabel=f"{t}: evaluation return")
            interval = eval_intervals([configs[r["run"]] for r in rows if r["task"] == t])
            caption = (
                f"{t}: deterministic evaluation return during training, each policy a thin line with a dot per "
                f"evaluation, each method's mean bold in a band of ± one std across its policies"
                + (f"; an evaluation every {interval} environment steps" if interval else "")
                + " (`eval_every` iterations: `--set eval_every=N` when training makes denser curves)."
            )
            image = _figure(fig, out, f"curves_{_safe(t)}", f"training curves {t}", caption)
            curve_blocks.append(Details(Heading(t, 3), [image], f"{sum(map(len, curves.values()))} curves", True))
    return [Heading("Training curves"), *curve_blocks] if curve_blocks else []


def policies_section(rows: list[dict]) -> list[Block]:
    """Per task (a closed section), every policy's results, and where all the columns are."""
    return [
        Heading("Per-policy results"),
        *[
            Details(
                Heading(f"{t}: every policy", 3),
                [policy_table([r for r in rows if r["task"] == t], name=f"policies_{_safe(t)}")],
                f"{sum(r['task'] == t for r in rows)} policies",
            )
            for t in tasks_of(rows)
        ],
        Paragraph(
            "All columns, and the full action-distance and state-diversity matrices, are in "
            f"`{EVALUATION_TABLE}` / `{EVALUATION_FILE}` here and in each run's `{EVALUATION_FOLDER}/` folder."
        ),
    ]


def configuration_section(ev: Evaluated, versions: dict[str, str], commands: list[str]) -> list[Block]:
    """The package versions, the commands behind the numbers, and each run's configuration and evaluation."""
    run_blocks: list[Block] = []
    for d in ev.docs:
        config = dict(ev.configs[d["run"]])
        if config:
            for key in ("refs_from", "ref_checkpoints"):  # borrowed references: shown relative, as every path here
                if config.get(key):
                    config[key] = shown(config[key]) if isinstance(config[key], str) else list(map(shown, config[key]))
            run_blocks += [
                Paragraph(f"`{Path(d['run']) / CONFIG_FILE}` (its paths relative):"),
                Code(json.dumps(config, indent=2), "json"),
            ]
        settings = ", ".join(f"{k} {v}" for k, v in d["settings"].items())
        run_blocks.append(Items([f"evaluation of `{d['run']}`: {settings}; fingerprint {d['fingerprint']}"]))
    return [
        Heading("Configuration and commands"),
        Table(header=["package", "version"], rows=[[k, v] for k, v in versions.items()], align="ll"),
        Paragraph("Commands that produced these numbers (training, then evaluation, then this report):"),
        Code("\n".join(commands), "bash"),
        Details(Heading("Configuration of each run", 3), run_blocks, f"{len(ev.docs)} runs"),
    ]


def report_commands(ev: Evaluated, command: str) -> list[str]:
    """The commands behind the numbers: each run's training, each run's evaluation, then this report's."""
    commands = [relative_command(population_command(d["run"], ev.configs[d["run"]])) for d in ev.docs]
    return [*commands, *(d["command"] for d in ev.docs), command]


def write_report(out: Path, blocks: list[Block], ev: Evaluated, versions: dict[str, str], commands: list[str]) -> Path:
    """Write the evaluation of every policy, every table as CSV and LaTeX, then report.md and report.html (last: a
    folder without report.md is a report cut short); returns report.md's path."""
    atomic_write_text(out / EVALUATION_TABLE, rows_to_csv(ev.rows))
    atomic_write_json(out / EVALUATION_FILE, {**ev.combined, "versions": versions, "commands": commands})
    for table in tables(blocks):
        atomic_write_text(out / f"{table.name}.csv", csv_text(table))
        atomic_write_text(out / f"{table.name}.tex", latex_text(table))
    atomic_write_text(out / "report.md", to_markdown(blocks))
    atomic_write_text(out / "report.html", to_html(blocks, "npsco report", out))
    return out / "report.md"


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
    out = report_folder(out)  # before anything is evaluated or written
    ev = evaluate_for_report(runs, episodes, seed, reuse, videos, log)
    log(f"writing the report into {out}")
    atomic_write_text(out / REPORT_MARKER, "written by npsco report: a re-run may rewrite this folder\n")  # first
    command = relative_command(
        command or "npsco report " + " ".join(shlex.quote(str(r)) for r in ev.runs) + f" --out {shlex.quote(str(out))}"
    )
    versions, commands = package_versions(), report_commands(ev, command)
    rows = ev.rows
    blocks = [
        *header_blocks(ev, command),
        *table1_section(ev.stats),
        *novelty_section(ev.stats),
        *criteria_blocks(rows),
        *descriptor_blocks(rows),
        *distance_blocks(rows, ev.docs, ev.configs, out, ev.cache, log),
        *fig2_section(rows, out),
        *fig3_section(rows, out),
        *fig4_section(rows, out),
        *curves_section(rows, ev.configs, out),
        *behaviour_blocks(rows, out, seed, videos, max_filmstrips if filmstrips else 0, log),
        *policies_section(rows),
        *configuration_section(ev, versions, commands),
    ]
    return write_report(out, blocks, ev, versions, commands)
