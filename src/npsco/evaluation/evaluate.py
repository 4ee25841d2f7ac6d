"""Evaluation of whole population runs: every trained policy measured (`npsco.evaluation.measure`), one row each
(`EvaluationRow`), scored against the run's PPO references (`npsco.evaluation.scoring`), and written as a tidy CSV and
a JSON document with the distance matrices and per-group statistics. Up-to-date documents are reused; several runs are
evaluated together (sharing the measurements of the references they borrow) and can be combined into one table."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from npsco.envs.maze import goal_name
from npsco.errors import NpscoError
from npsco.evaluation.descriptors import describe
from npsco.evaluation.measure import (
    FIG2_START,
    MAX_DIVERSITY_STATES,
    MAX_MEASURED_STATES,
    MeasureCache,
    action_distance_matrix,
    diversity_states,
    mean_reference_distance,
    measure_policy,
    novelty_against,
    state_distance_matrix,
    yardstick,
)
from npsco.evaluation.rows import ROW, EvaluationRow, group_of, primary_scale, rows_to_csv, separate_scales
from npsco.evaluation.runs import RunInfo, load_run, run_fingerprint
from npsco.evaluation.scoring import mean_or_none, score_rows, statistics
from npsco.filecheck import EPISODES, SEED, Fields, ListOf, check
from npsco.io import atomic_write_json, atomic_write_text, inside, read_json
from npsco.layout import EVALUATION_FILE, EVALUATION_FOLDER, EVALUATION_TABLE, MANIFEST_FILE
from npsco.manifest import Member
from npsco.novelty.threshold import default_threshold
from npsco.paths import output_folder
from npsco.policy import Policy, load_policy
from npsco.seeds import DISTANCE_EPISODES
from npsco.stats import state_diversity_matrix
from npsco.tasks import default_distance_episodes, default_eval_episodes, task_name
from npsco.version import __version__

EVALUATION_FORMAT = "npsco-evaluation"
EVALUATION_VERSION = 4
"""2: `success_final` and `relative_novelty_paper`; 3: `nearest`, `nearest_ratio`, `state_distance`, `return_ratio`,
`meets`; 4: `yardstick`, `yardstick_of` and the behaviour descriptors (an evaluation of an earlier version is
recomputed)."""


def _r0_scale(member: Member, config: dict) -> float | None:
    """The multiple of the default r0 a novel policy was trained at (None for references, PPO, or an absolute r0)."""
    method = config.get("method") or {}
    if member.role == "reference" or member.method == "ppo" or method.get("r0") is not None:
        return None
    return member.chain.multiple if member.chain is not None else 1.0


def evaluate_run(
    run: str | Path,
    episodes: int | None = None,
    seed: int = 0,
    cache: MeasureCache | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """Evaluate every trained policy of a population run; returns the evaluation document (JSON-ready).

    Per policy: deterministic return over `episodes` episodes (env i seeded `seed + i`); novelty = min over the run's
    PPO references (other than itself) of D(policy, ref), measured on the policy's own visited states; relative
    novelty (the paper's, and / mean D between references, same episodes) and success (both: see `score_rows`); state
    novelty = min over the references of the sliced-Wasserstein distance between visited-state distributions; on the
    maze the goals reached and the Fig. 2 trajectory from `FIG2_START`.
    """
    info = load_run(run)
    episodes = episodes or default_eval_episodes(info.env_id)
    cache = {} if cache is None else cache
    max_steps = (info.config.get("ppo") or {}).get("max_episode_steps")
    measurements = []
    for k, m in enumerate(info.members):
        key = (str(info.checkpoint(m)), episodes, seed)
        if key not in cache:
            log(f"  [{k + 1}/{len(info.members)}] {m.name}: {episodes} deterministic episodes")
            cache[key] = measure_policy(load_policy(info.checkpoint(m)), episodes, seed, max_steps)
        measurements.append(cache[key])
    ref_idx = [i for i, m in enumerate(info.members) if m.role == "reference"]
    actions = action_distance_matrix(measurements)
    states = state_diversity_matrix([diversity_states(x.states) for x in measurements])
    mmd = state_distance_matrix(measurements, ref_idx)
    names = [m.name for m in info.members]
    avoided = [[names.index(n) for n in m.references if n in names] for m in info.members]
    ppo_distance = mean_reference_distance(actions, ref_idx)

    primary = primary_scale(info.config)
    rows = []
    for i, (m, x) in enumerate(zip(info.members, measurements, strict=True)):
        summary = x.episodes.summary()
        nearest = novelty_against(actions, i, avoided[i]) if m.role == "novel" else None
        stick = yardstick(actions, ref_idx, nearest)
        behaviour = describe(info.env_id, [e for e in x.episodes.states if len(e)])  # (those measured)
        maze: dict[str, Any] = {}
        if x.fig2_trajectory is not None and x.fig2_goal is not None:  # the maze: both are measured together
            maze = {f"goal_{g}": n / summary["episodes"] for g, n in summary["goals"].items()}
            maze.update(goal_from_right=goal_name(x.fig2_goal), fig2_trajectory=x.fig2_trajectory.round(4).tolist())
        rows.append(
            EvaluationRow(
                run=str(info.path),
                env=info.env_id,
                task=task_name(info.env_id),
                group=group_of(m.role, m.method, m.chain, primary),
                method=m.method,
                chain=None if m.chain is None else m.chain.name,
                name=m.name,
                role=m.role,
                seed=m.seed,
                threshold=m.threshold,
                r0_scale=_r0_scale(m, info.config),
                episodes=summary["episodes"],
                eval_seed=seed,
                **{k: summary[k] for k in ("return_mean", "return_std", "return_min", "return_max", "length_mean")},
                novelty=novelty_against(actions, i, ref_idx),
                state_novelty=novelty_against(states, i, ref_idx),
                nearest=nearest,
                yardstick=stick,
                yardstick_of=None if stick is None else len(ref_idx),
                **({} if behaviour is None else behaviour.to_dict()),
                candidates=len(m.candidates) or None,
                candidate=next((c.index for c in m.candidates if c.kept), None),
                state_distance=novelty_against(mmd, i, avoided[i]) if m.role == "novel" and mmd is not None else None,
                checkpoint=str(info.checkpoint(m)),
                eval_curve=[list(map(float, p)) for p in m.eval_curve],
                returns=[float(r) for r in x.episodes.returns],
                episode_seeds=[seed + e for e in range(summary["episodes"])],
                **maze,
            )
        )
    rows = score_rows(rows, ppo_distance, action_threshold(info, [m.policy for m in measurements]))
    return {
        "format": EVALUATION_FORMAT,
        "format_version": EVALUATION_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "npsco_version": __version__,
        "run": str(info.path),
        "env_id": info.env_id,
        "fingerprint": _fingerprint(info, episodes, seed),
        "settings": {
            "episodes": episodes,
            "seed": seed,
            "deterministic": True,
            "distance": "deterministic",
            "max_diversity_states": MAX_DIVERSITY_STATES,
            "max_measured_states": MAX_MEASURED_STATES,
            "fig2_start": list(FIG2_START),
        },
        "command": f"npsco evaluate {info.path} --episodes {episodes} --seed {seed}",
        "ppo_mean_distance": ppo_distance,
        "r0_default": info.r0_default,
        "ppo_mean_novelty": mean_or_none([r.novelty for r in rows if r.role == "reference"]),
        "pending": info.pending,
        "policies": [r.to_dict() for r in rows],
        "action_distance_matrix": {
            "names": names,
            "matrix": actions.round(6).tolist(),
            "definition": "D[i][j] = mean over states visited by i of ||mu_i(s) - mu_j(s)||",
        },
        "state_diversity_matrix": {
            "names": names,
            "matrix": states.round(6).tolist(),
            "definition": "sliced Wasserstein-1 between the standardised visited states of i "
            "and j (npsco.stats.state_diversity, 64 projections)",
        },
        "state_distance_matrix": None
        if mmd is None
        else {
            "names": names,
            "matrix": mmd.round(6).tolist(),
            "definition": "MMD (RBF kernel, random Fourier features) between the visited states of i and j, "
            "standardised by the references' (npsco.novelty.states)",
        },
        "statistics": statistics(rows),
    }


def action_threshold(info: RunInfo, policies: list[Policy]) -> float | None:
    """The run's r0_default in the action distance (the paper's threshold): threshold.json's, or, for a run whose
    threshold is in another metric (`state`), measured from its references as the threshold is (their deterministic
    episodes, `DISTANCE_EPISODES`); None without one (an absolute r0, or fewer than 2 references)."""
    if info.r0_metric == "deterministic":
        return info.r0_default
    refs = [p for p, m in zip(policies, info.members, strict=True) if m.role == "reference"]
    if info.r0_default is None or len(refs) < 2:
        return None
    episodes = info.config.get("threshold_episodes") or default_distance_episodes(info.env_id)
    steps = (info.config.get("ppo") or {}).get("max_episode_steps")
    return default_threshold(refs, episodes=episodes, seed=DISTANCE_EPISODES, max_episode_steps=steps).r0


def _fingerprint(info: RunInfo, episodes: int, seed: int) -> str:
    return run_fingerprint(info, episodes, seed, EVALUATION_VERSION)


# ------------------------------------------------------------------------------------------------------------ files
def evaluation_dir(run: str | Path) -> Path:
    return Path(run) / EVALUATION_FOLDER


def write_evaluation(doc: dict, out_dir: str | Path) -> tuple[Path, Path]:
    """Write `evaluation.json` and the tidy `evaluation.csv` (rows of `doc["policies"]`) atomically into `out_dir`."""
    out = Path(out_dir)
    atomic_write_json(out / EVALUATION_FILE, json_ready(doc))
    atomic_write_text(out / EVALUATION_TABLE, rows_to_csv(doc["policies"]))
    return out / EVALUATION_FILE, out / EVALUATION_TABLE


def json_ready(obj: Any) -> Any:
    """NaN/inf -> None (JSON has no NaN); numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {k: json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def cached_evaluation(run: str | Path, episodes: int | None = None, seed: int = 0) -> dict | None:
    """The evaluation in `RUN/evaluation/evaluation.json` if it exists and is up to date (same manifest,
    checkpoints and settings), else None."""
    path = evaluation_dir(run) / EVALUATION_FILE
    if not path.exists():
        return None
    try:
        doc = check(read_json(path), EVALUATION, path)
        check_matrices(doc, path)
    except NpscoError:  # a damaged or edited cache is recomputed
        return None
    info = load_run(run)
    episodes = episodes or default_eval_episodes(info.env_id)
    if doc.get("format_version") != EVALUATION_VERSION or doc.get("fingerprint") != _fingerprint(info, episodes, seed):
        return None
    # the statistics are those of the rows (recomputed: a pure function of them), whatever the file says
    return {**doc, "statistics": json_ready(statistics([EvaluationRow.from_dict(r) for r in doc["policies"]]))}


_MATRIX = (Fields({"names": ListOf(str), "matrix": ListOf(ListOf((float, None)))}, required=("names", "matrix")), None)
EVALUATION = Fields(
    {
        "format": str,
        "format_version": int,
        "run": str,
        "env_id": str,
        "fingerprint": str,
        "command": str,
        "settings": Fields({"episodes": EPISODES, "seed": SEED}, required=("episodes", "seed")),
        "policies": ListOf(ROW),
        "action_distance_matrix": _MATRIX,
        "state_diversity_matrix": _MATRIX,
        "state_distance_matrix": _MATRIX,
    },
    required=("format_version", "run", "fingerprint", "command", "settings", "policies"),
)
"""A run's evaluation document as it is read back (`cached_evaluation`): the fields npsco uses, type- and
range-checked (its statistics are recomputed from its rows)."""


def check_matrices(doc: dict, path: Path) -> None:
    """Refuse a document whose distance matrices are not square over their names."""
    for key in ("action_distance_matrix", "state_diversity_matrix", "state_distance_matrix"):
        block = doc.get(key)
        if block is not None and (
            len(block["matrix"]) != len(block["names"]) or any(len(r) != len(block["names"]) for r in block["matrix"])
        ):
            raise NpscoError(f"{path}: {key} is not a square matrix over its {len(block['names'])} names")


# ------------------------------------------------------------------------------------------------------ several runs
def evaluate_runs(
    runs: list[str | Path],
    episodes: int | None = None,
    seed: int = 0,
    reuse: bool = True,
    write: bool = True,
    log: Callable[[str], None] = print,
    cache: MeasureCache | None = None,
) -> list[dict]:
    """Evaluate several population runs (sharing the measurements of common references); each run's document is
    reused from `RUN/evaluation/` when up to date (`reuse`) and written there when computed (`write`). `cache` keeps
    the measurements for the caller (the report's distance heatmap)."""
    cache = {} if cache is None else cache
    docs = []
    for run in runs:
        doc = cached_evaluation(run, episodes, seed) if reuse else None
        if doc is not None:
            log(f"{run}: evaluation up to date ({evaluation_dir(run) / EVALUATION_FILE})")
        else:
            # written only into a real folder of the run, never through a link (checked before the work)
            out = inside(run, EVALUATION_FOLDER) if write else None
            log(f"{run}: evaluating")
            doc = json_ready(evaluate_run(run, episodes, seed, cache, log))
            if out is not None:  # checked again: the folder may have changed during the evaluation
                write_evaluation(doc, inside(run, EVALUATION_FOLDER))
        docs.append(doc)
    return docs


def combine(docs: list[dict]) -> dict:
    """One table from several runs' evaluations: rows of all runs, each policy once (references borrowed by several
    runs are the same checkpoint), and their statistics."""
    rows, seen = [], set()
    for doc in docs:
        for row in doc["policies"]:
            if row["checkpoint"] not in seen:
                seen.add(row["checkpoint"])
                rows.append(row)
    rows = separate_scales(rows)
    return {
        "format": EVALUATION_FORMAT + "-combined",
        "format_version": EVALUATION_VERSION,
        "runs": [d["run"] for d in docs],
        "commands": [d["command"] for d in docs],
        "policies": rows,
        "statistics": statistics([EvaluationRow.from_dict(r) for r in rows]),
    }


def evaluate_and_write(
    runs: list[str | Path],
    episodes: int | None = None,
    seed: int = 0,
    reuse: bool = True,
    out: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> tuple[dict, list[Path]]:
    """`npsco evaluate RUN...`: every policy of each population run, written to `RUN/evaluation/`, or, with `out`, one
    combined table there. Returns the statistics (of the combined table for several runs) and the files written."""
    if out is not None:
        output_folder(out)  # before anything is read, evaluated or written (npsco.paths)
    missing = [r for r in runs if not (Path(r) / MANIFEST_FILE).exists()]
    if missing:
        raise NpscoError(
            f"{missing[0]}: not a population run directory (no manifest.json); evaluate checkpoints one at a time"
        )
    docs = evaluate_runs(runs, episodes, seed, reuse=reuse, write=out is None, log=log)
    doc = docs[0] if len(docs) == 1 else combine(docs)
    if out is not None:
        written = list(write_evaluation(doc, out))
    else:
        written = [evaluation_dir(d["run"]) / name for d in docs for name in (EVALUATION_FILE, EVALUATION_TABLE)]
    return doc["statistics"], written
