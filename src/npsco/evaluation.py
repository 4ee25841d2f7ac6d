"""Evaluation of policies: deterministic episodes, with the visited states kept for novelty measurements
(`run_episodes`), and of whole population runs (`evaluate_run`, `evaluate_runs`): per policy its return, novelty
against the PPO references, relative novelty, success (paper Sec. 4.2) and state novelty, written as a tidy CSV and a
JSON with per-method statistics (mean +- std, IQM with bootstrap CIs). docs/report.md describes every column."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from npsco.config import MAZE_ID, default_r0_scale
from npsco.envs.make import final_observations, make_vector_env
from npsco.policy import Policy


@dataclass
class Episodes:
    """The outcome of `run_episodes`: one entry per episode (episode i ran on an env seeded `seed + i`)."""

    returns: np.ndarray
    lengths: np.ndarray
    seed: int
    goals: np.ndarray | None = None
    """Maze only: the goal reached (index into `npsco.envs.maze.GOALS`, -1 for none)."""
    states: list[np.ndarray] = field(default_factory=list)
    """With `record_states`: the (length, obs_dim) raw observations at which each episode acted."""
    final_obs: np.ndarray | None = None
    """With `record_states`: the last observation of each episode (episodes, obs_dim); `trajectory(i)` joins them."""

    def trajectory(self, i: int) -> np.ndarray:
        """Every observation of episode i, the final one included (for pictures of the path)."""
        return np.concatenate([self.states[i], self.final_obs[i][None]], axis=0)

    def summary(self) -> dict:
        """JSON-ready summary: mean, std, min, max of the returns, the mean length, and goal counts on the maze."""
        out = {
            "episodes": int(self.returns.size),
            "seed": self.seed,
            "return_mean": float(self.returns.mean()),
            "return_std": float(self.returns.std()),
            "return_min": float(self.returns.min()),
            "return_max": float(self.returns.max()),
            "length_mean": float(self.lengths.mean()),
        }
        if self.goals is not None:
            from npsco.envs.maze import GOAL_NAMES

            out["goals"] = {name: int((self.goals == i).sum()) for i, name in enumerate(GOAL_NAMES)}
            out["goals"]["none"] = int((self.goals < 0).sum())
        return out


def run_episodes(
    policy: Policy,
    episodes: int,
    seed: int = 0,
    env_id: str | None = None,
    max_episode_steps: int | None = None,
    deterministic: bool = True,
    record_states: bool = False,
    start: tuple[float, float] | Sequence[tuple[float, float]] | None = None,
) -> Episodes:
    """Run `episodes` episodes of `policy` in parallel (one vector env, env i seeded `seed + i`), one episode per env.

    Actions are the clipped mean (deterministic) or clipped Gaussian samples drawn from a generator seeded with `seed`.
    `start` fixes the maze's start position: one (x, y) for every episode, or one per episode.
    """
    env_id = env_id or policy.metadata["env_id"]
    envs = make_vector_env(env_id, episodes, max_episode_steps=max_episode_steps)
    rng = np.random.default_rng(seed)
    options = {"start": np.asarray(start, np.float32)} if start is not None else None
    obs, _ = envs.reset(seed=seed, options=options)
    returns = np.zeros(episodes)
    lengths = np.zeros(episodes, np.int64)
    running = np.ones(episodes, bool)
    goals = np.full(episodes, -1, np.int64) if env_id == MAZE_ID else None
    trajectories: list[list[np.ndarray]] = [[] for _ in range(episodes)]
    last_obs = np.zeros((episodes, obs.shape[1]), np.float32)
    try:
        while running.any():
            action = policy.act(obs, deterministic=deterministic, rng=rng)
            if record_states:
                for i in np.flatnonzero(running):
                    trajectories[i].append(obs[i].astype(np.float32))
            obs, reward, terminated, truncated, infos = envs.step(action)
            returns[running] += reward[running]
            lengths[running] += 1
            ended = (terminated | truncated) & running
            if ended.any():
                if goals is not None:
                    from npsco.envs.maze import goal_of

                    final = final_observations(infos, ended, obs)
                    goals[ended] = goal_of(final[ended])
                if record_states:
                    last_obs[ended] = final_observations(infos, ended, obs)[ended]
                running &= ~ended
    finally:
        envs.close()
    states = [np.stack(t) for t in trajectories] if record_states else []
    return Episodes(returns=returns, lengths=lengths, seed=seed, goals=goals, states=states,
                    final_obs=last_obs if record_states else None)


# =====================================================================================================================
# Population runs: every policy's return, novelty, success and state diversity, as one tidy table.
# =====================================================================================================================

EVALUATION_FORMAT = "npsco-evaluation"
EVALUATION_VERSION = 2
"""2: `success_final` and `relative_novelty_paper` (an evaluation of version 1 is recomputed)."""
FIG2_START = (14.5, 8.0)
"""Start of the paper's Fig. 2 trajectories: near the right edge, just outside the right region ((15, 8) is inside)."""
MAX_DIVERSITY_STATES = 2000
"""The state diversity compares at most this many visited states per policy (evenly spaced in visiting order)."""
PAPER_ORDER = ("ppo", "wsr", "tnb", "cpo", "ctnb", "ipd")
"""Order of the methods in Table 1 (the paper's); other groups follow."""
CSV_COLUMNS = (
    "run", "env", "task", "group", "method", "chain", "name", "role", "seed", "threshold", "r0_scale",
    "episodes", "eval_seed", "return_mean", "return_std", "return_min", "return_max", "length_mean",
    "novelty", "relative_novelty_paper", "relative_novelty", "state_novelty", "success", "success_final",
    "best_training_eval", "success_baseline",
    "goal_top", "goal_bottom", "goal_left", "goal_right", "goal_none", "goal_from_right", "checkpoint",
)
"""Columns of `evaluation.csv`, one row per policy (docs/report.md says what each means)."""


def default_episodes(env_id: str) -> int:
    """Deterministic evaluation episodes per policy: 100 on the maze (paper Sec. 4.1), 10 otherwise."""
    return 100 if env_id == MAZE_ID else 10


def task_name(env_id: str) -> str:
    """The task's short name used in tables, figures and folders: the env id without its namespace or module
    (`npsco/FourRewardMaze-v0` -> `FourRewardMaze-v0`, `mytasks:Reach-v0` -> `Reach-v0`)."""
    return env_id.split(":")[-1].split("/")[-1]


def group_of(role: str, method: str, chain: str | None, primary_scale: float = 1.0) -> str:
    """The label a policy is aggregated under: `ppo` for the references, else its chain, where the chain at the run's
    primary threshold multiple (the first of its `r0_scales`: the first `--r0-scale`, or the task's default multiple
    when none was given) counts as the method itself (`ipd`); the run's other multiples keep their chain names."""
    if role == "reference":
        return "ppo"
    if not chain:
        return method
    base, sep, scale = chain.partition("-r0x")
    if sep and _float_or_none(scale) == primary_scale:
        return base
    return chain


def primary_scale(config: dict, env_id: str) -> float:
    """The first threshold multiple of a population run's config.json (the task's default when it records none)."""
    scales = config.get("r0_scales") or [default_r0_scale(env_id)]
    return float(scales[0])


def chain_scale(chain: str | None) -> float | None:
    """The r0 multiple of a chain named `METHOD-r0xS`, None for other chains."""
    if not chain or "-r0x" not in chain:
        return None
    return _float_or_none(chain.partition("-r0x")[2])


def group_sort_key(group: str) -> tuple:
    """Paper order of methods (PPO, WSR, TNB, CPO, CTNB, IPD), then others alphabetically; scaled chains by scale."""
    base = group.partition("-r0x")[0]
    scale = chain_scale(group)
    rank = PAPER_ORDER.index(base) if base in PAPER_ORDER else len(PAPER_ORDER)
    return (rank, base, -1.0 if scale is None else scale, group)


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------- run directories
@dataclass
class RunMember:
    """A trained policy of a population run, with its checkpoint path resolved."""

    name: str
    role: str
    method: str
    seed: int
    checkpoint: Path
    chain: str | None = None
    index: int | None = None
    threshold: float | None = None
    eval_curve: list[list[float]] = field(default_factory=list)


@dataclass
class RunInfo:
    """What `evaluate_run` needs from a population run directory."""

    path: Path
    env_id: str
    config: dict
    members: list[RunMember]
    """The members whose training is done (others are listed in `pending`)."""
    pending: list[str]
    r0_default: float | None

    @property
    def references(self) -> list[RunMember]:
        return [m for m in self.members if m.role == "reference"]


def load_run(run: str | Path) -> RunInfo:
    """Read a population run directory (manifest.json, config.json, threshold.json); NpscoError if it is not one."""
    from npsco.errors import NpscoError
    from npsco.io import read_json

    path = Path(run)
    if not path.is_dir():
        raise NpscoError(f"{run}: no such run directory")
    if not (path / "manifest.json").exists():
        raise NpscoError(f"{run}: not a population run directory (no manifest.json)")
    manifest = read_json(path / "manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != "npsco-population":
        raise NpscoError(f"{run}/manifest.json: not an npsco population manifest")
    config = read_json(path / "config.json") if (path / "config.json").exists() else {}
    from npsco.population import check_borrowed

    members, pending = [], []
    for m in manifest.get("members", []):
        if m.get("status") != "done":
            pending.append(m["name"])
            continue
        check_borrowed(m, path / m["path"] / "policy.safetensors")
        members.append(RunMember(
            name=m["name"], role=m["role"], method=m["method"], seed=int(m["seed"]),
            checkpoint=(path / m["path"] / "policy.safetensors").resolve(), chain=m.get("chain"), index=m.get("index"),
            threshold=m.get("threshold"), eval_curve=[list(map(float, p)) for p in m.get("eval_curve") or []]))
    if not members:
        raise NpscoError(f"{run}: no trained policy yet (run `npsco population` to completion first)")
    r0 = manifest.get("r0_default")
    if r0 is None and (path / "threshold.json").exists():
        r0 = read_json(path / "threshold.json").get("r0_default")
    return RunInfo(path=path.resolve(), env_id=manifest["env_id"], config=config, members=members, pending=pending,
                   r0_default=r0)


def run_fingerprint(info: RunInfo, episodes: int, seed: int) -> str:
    """A hash of everything an evaluation depends on: the manifest, each checkpoint's size and mtime, the settings."""
    import hashlib
    import json

    parts = {"format_version": EVALUATION_VERSION, "episodes": episodes, "seed": seed,
             "manifest": (info.path / "manifest.json").read_text(encoding="utf-8"),
             "checkpoints": [[str(m.checkpoint), *_stat(m.checkpoint)] for m in info.members]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _stat(path: Path) -> list[int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return [-1, -1]
    return [st.st_size, st.st_mtime_ns]


# ------------------------------------------------------------------------------------------------------ measuring
@dataclass
class Measurement:
    """One policy's deterministic episodes and, on the maze, its Fig. 2 trajectory."""

    policy: Policy
    episodes: Episodes
    states: np.ndarray
    """Every state at which the policy acted, all episodes stacked: the states its distances are measured on."""
    fig2_trajectory: np.ndarray | None = None
    fig2_goal: int | None = None


def measure_policy(policy: Policy, episodes: int, seed: int, max_episode_steps: int | None = None) -> Measurement:
    """Run `episodes` deterministic episodes (env i seeded `seed + i`), keeping the visited states; on the maze also
    the episode from `FIG2_START`."""
    res = run_episodes(policy, episodes, seed=seed, max_episode_steps=max_episode_steps, record_states=True)
    trajectory = goal = None
    if policy.metadata["env_id"] == MAZE_ID:
        one = run_episodes(policy, 1, seed=seed, max_episode_steps=max_episode_steps, record_states=True,
                           start=FIG2_START)
        trajectory, goal = one.trajectory(0), int(one.goals[0])
    return Measurement(policy=policy, episodes=res, states=np.concatenate(res.states, axis=0),
                       fig2_trajectory=trajectory, fig2_goal=goal)


def action_distance_matrix(measurements: list[Measurement]) -> np.ndarray:
    """D[i, j] = mean over the states visited by policy i of ||mu_i(s) - mu_j(s)|| (executed, clipped mean actions);
    one batched `ReferenceSet` call per row. The diagonal is 0; D is not symmetric."""
    from npsco.novelty.references import ReferenceSet

    everyone = ReferenceSet([m.policy for m in measurements])
    matrix = np.zeros((len(measurements), len(measurements)))
    for i, m in enumerate(measurements):
        matrix[i] = everyone.distances(m.states, m.policy.mean_action(m.states)).mean(axis=0)
        matrix[i, i] = 0.0
    return matrix


def diversity_states(states: np.ndarray, limit: int = MAX_DIVERSITY_STATES) -> np.ndarray:
    """At most `limit` of the visited states, evenly spaced (deterministic)."""
    if len(states) <= limit:
        return states
    return states[np.linspace(0, len(states) - 1, limit).round().astype(int)]


def novelty_against(matrix: np.ndarray, i: int, references: list[int]) -> float | None:
    """min over the references j != i of matrix[i, j] (None when there is none): the paper's novelty U."""
    others = [j for j in references if j != i]
    return float(matrix[i, others].min()) if others else None


def mean_reference_distance(matrix: np.ndarray, references: list[int]) -> float | None:
    """Mean of D(i, j) over ordered pairs of distinct references: the paper's default r0, here re-measured."""
    if len(references) < 2:
        return None
    sub = matrix[np.ix_(references, references)]
    return float(sub[~np.eye(len(references), dtype=bool)].mean())


# -------------------------------------------------------------------------------------------------------- scoring
def score_rows(rows: list[dict], ppo_mean_distance: float | None) -> list[dict]:
    """Add `success`, `success_final`, `success_baseline`, `best_training_eval`, `relative_novelty_paper` and
    `relative_novelty` to per-policy rows (new dicts).

    Each row needs `role`, `return_mean`, `eval_curve` ([[step, return], ...] from training) and `novelty`.
    The baseline is the median of the references' evaluated returns (paper Sec. 4.2).

    - `success`, the paper's: a novel policy succeeds if its training evaluation curve reached the baseline at some
      evaluation (`npsco.stats.success_flags`; with no curve, its evaluated return stands in); a reference is scored on
      its evaluated (final) return, so PPO's rate is about 0.5 "by definition", as in the paper.
    - `success_final`: every policy, references included, scored alike on its evaluated (final) return.
    - `relative_novelty_paper`, the paper's: novelty / the mean novelty of the references (each one's novelty is its
      distance to its nearest other reference), so the references' mean is 1.
    - `relative_novelty`: novelty / `ppo_mean_distance`, the mean pairwise distance between the references.
    """
    from npsco.stats import relative_novelty, success_baseline, success_flags

    refs = [r["return_mean"] for r in rows if r["role"] == "reference"]
    baseline = success_baseline(refs) if refs else None
    ppo_novelty = _mean([r.get("novelty") for r in rows if r["role"] == "reference"])

    def relative(novelty: float | None, ppo: float | None) -> float | None:
        usable = novelty is not None and ppo is not None and ppo > 0
        return float(relative_novelty(novelty, ppo)) if usable else None

    out = []
    for row in rows:
        row = dict(row)
        curve = [p[1] for p in row.get("eval_curve") or []]
        row["best_training_eval"] = max(curve) if curve else None
        row["success_baseline"] = baseline
        row["success"] = row["success_final"] = None
        if baseline is not None:
            row["success_final"] = bool(success_flags([[row["return_mean"]]], refs)[0])
            row["success"] = (row["success_final"] if row["role"] == "reference"
                              else bool(success_flags([curve or [row["return_mean"]]], refs)[0]))
        row["relative_novelty_paper"] = relative(row.get("novelty"), ppo_novelty)
        row["relative_novelty"] = relative(row.get("novelty"), ppo_mean_distance)
        out.append(row)
    return out


# ----------------------------------------------------------------------------------------------------- statistics
def metric_summary(values, seed: int = 0) -> dict | None:
    """n, mean +- std (population std, as the paper), IQM with a 95% percentile-bootstrap CI of finite values."""
    from npsco.stats import bootstrap_ci, iqm, mean_std

    x = np.array([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if x.size == 0:
        return None
    mean, std = mean_std(x)
    low, high = bootstrap_ci(x, iqm, seed=seed)
    return {"n": int(x.size), "mean": mean, "std": std, "iqm": float(iqm(x)), "iqm_ci_low": low, "iqm_ci_high": high}


def statistics(rows: list[dict]) -> dict:
    """Per group and task: return, relative novelty (both) and state novelty summaries and both success rates; per
    group across tasks: the IQM of returns normalised by each task's success baseline (PPO median), with a
    stratified-bootstrap 95% CI (tasks are the strata)."""
    from npsco.stats import stratified_bootstrap_ci

    per_task = []
    keys = sorted({(r["group"], r["task"]) for r in rows}, key=lambda k: (group_sort_key(k[0]), k[1]))
    for group, task in keys:
        sel = [r for r in rows if r["group"] == group and r["task"] == task]
        per_task.append({
            "group": group, "task": task, "n": len(sel),
            "return": metric_summary([r["return_mean"] for r in sel]),
            "success_rate": _rate([r["success"] for r in sel]),
            "success_rate_final": _rate([r["success_final"] for r in sel]),
            "relative_novelty_paper": metric_summary([r["relative_novelty_paper"] for r in sel]),
            "relative_novelty": metric_summary([r["relative_novelty"] for r in sel]),
            "state_novelty": metric_summary([r["state_novelty"] for r in sel]),
        })
    aggregate = []
    for group in sorted({r["group"] for r in rows}, key=group_sort_key):
        scores = {}
        for r in rows:
            if r["group"] == group and r["success_baseline"] and r["success_baseline"] > 0:
                scores.setdefault(r["task"], []).append(r["return_mean"] / r["success_baseline"])
        if scores:
            est = stratified_bootstrap_ci(scores)
            aggregate.append({"group": group, "tasks": sorted(scores), "n": sum(map(len, scores.values())),
                              "normalized_return_iqm": est.point, "ci_low": est.low, "ci_high": est.high})
    return {"per_task": per_task, "aggregate": aggregate,
            "definitions": {
                "return": "deterministic return per policy (mean over its evaluation episodes); mean +- std over "
                          "policies (population std) and IQM with a 95% percentile-bootstrap CI (2000 resamples)",
                "success_rate": "the paper's: fraction of policies that reached the median evaluated return of the "
                                "PPO references (novel policies: at some training evaluation; references: their "
                                "evaluated return)",
                "success_rate_final": "fraction of policies (references included) whose evaluated final return "
                                      "reached the median evaluated return of the PPO references",
                "relative_novelty_paper": "the paper's: novelty / the mean novelty of the PPO references (each one's "
                                          "distance to its nearest other reference)",
                "relative_novelty": "novelty / the mean pairwise distance between the PPO references",
                "normalized_return_iqm": "IQM over all policies of a group of return / the task's success baseline, "
                                         "95% stratified-bootstrap CI (resampling within each task)"}}


# ------------------------------------------------------------------------------------------------- one run, whole
def _r0_scale(member: RunMember, config: dict) -> float | None:
    """The multiple of the default r0 a novel policy was trained at (None for references, PPO, or an absolute r0)."""
    method = config.get("method") or {}
    if member.role == "reference" or member.method == "ppo" or method.get("r0") is not None:
        return None
    return chain_scale(member.chain) or 1.0


MeasureCache = dict
"""(checkpoint, episodes, seed) -> Measurement: shares the work between runs that borrow the same references."""


def evaluate_run(run: str | Path, episodes: int | None = None, seed: int = 0, cache: MeasureCache | None = None,
                 log=print) -> dict:
    """Evaluate every trained policy of a population run; returns the evaluation document (JSON-ready).

    Per policy: deterministic return over `episodes` episodes (env i seeded `seed + i`); novelty = min over the run's
    PPO references (other than itself) of D(policy, ref), measured on the policy's own visited states; relative
    novelty (the paper's, and / mean D between references, same episodes) and success (both: see `score_rows`); state
    novelty = min over the references of the sliced-Wasserstein distance between visited-state distributions; on the
    maze the goals reached and the Fig. 2 trajectory from `FIG2_START`.
    """
    from datetime import datetime, timezone

    import npsco
    from npsco.policy import load_policy
    from npsco.stats import state_diversity_matrix

    info = load_run(run)
    episodes = episodes or default_episodes(info.env_id)
    cache = {} if cache is None else cache
    max_steps = (info.config.get("ppo") or {}).get("max_episode_steps")
    measurements = []
    for k, m in enumerate(info.members):
        key = (str(m.checkpoint), episodes, seed)
        if key not in cache:
            log(f"  [{k + 1}/{len(info.members)}] {m.name}: {episodes} deterministic episodes")
            cache[key] = measure_policy(load_policy(m.checkpoint), episodes, seed, max_steps)
        measurements.append(cache[key])
    ref_idx = [i for i, m in enumerate(info.members) if m.role == "reference"]
    actions = action_distance_matrix(measurements)
    states = state_diversity_matrix([diversity_states(x.states) for x in measurements])
    ppo_distance = mean_reference_distance(actions, ref_idx)

    primary = primary_scale(info.config, info.env_id)
    rows = []
    for i, (m, x) in enumerate(zip(info.members, measurements)):
        summary = x.episodes.summary()
        row = {
            "run": str(info.path), "env": info.env_id, "task": task_name(info.env_id),
            "group": group_of(m.role, m.method, m.chain, primary),
            "method": m.method, "chain": m.chain, "name": m.name, "role": m.role, "seed": m.seed,
            "threshold": m.threshold, "r0_scale": _r0_scale(m, info.config),
            "episodes": summary["episodes"], "eval_seed": seed,
            **{k: summary[k] for k in ("return_mean", "return_std", "return_min", "return_max", "length_mean")},
            "novelty": novelty_against(actions, i, ref_idx),
            "state_novelty": novelty_against(states, i, ref_idx),
            "checkpoint": str(m.checkpoint),
            "eval_curve": m.eval_curve,
            "returns": [float(r) for r in x.episodes.returns],
            "episode_seeds": [seed + e for e in range(summary["episodes"])],
        }
        if x.fig2_trajectory is not None:
            from npsco.envs.maze import goal_name

            row.update({f"goal_{g}": n / summary["episodes"] for g, n in summary["goals"].items()})
            row["goal_from_right"] = goal_name(x.fig2_goal)
            row["fig2_trajectory"] = x.fig2_trajectory.round(4).tolist()
        rows.append(row)
    rows = score_rows(rows, ppo_distance)
    names = [m.name for m in info.members]
    return {
        "format": EVALUATION_FORMAT, "format_version": EVALUATION_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "npsco_version": npsco.__version__,
        "run": str(info.path), "env_id": info.env_id, "fingerprint": run_fingerprint(info, episodes, seed),
        "settings": {"episodes": episodes, "seed": seed, "deterministic": True, "distance": "deterministic",
                     "max_diversity_states": MAX_DIVERSITY_STATES, "fig2_start": list(FIG2_START)},
        "command": f"npsco evaluate {info.path} --episodes {episodes} --seed {seed}",
        "ppo_mean_distance": ppo_distance, "r0_default": info.r0_default,
        "ppo_mean_novelty": _mean([r["novelty"] for r in rows if r["role"] == "reference"]),
        "pending": info.pending,
        "policies": rows,
        "action_distance_matrix": {"names": names, "matrix": actions.round(6).tolist(),
                                   "definition": "D[i][j] = mean over states visited by i of ||mu_i(s) - mu_j(s)||"},
        "state_diversity_matrix": {"names": names, "matrix": states.round(6).tolist(),
                                   "definition": "sliced Wasserstein-1 between the standardised visited states of i "
                                                 "and j (npsco.stats.state_diversity, 64 projections)"},
        "statistics": statistics(rows),
    }


def _rate(flags: list) -> float | None:
    """The fraction of True among the flags that are not None (None when there is none)."""
    flags = [f for f in flags if f is not None]
    return float(np.mean(flags)) if flags else None


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


# --------------------------------------------------------------------------------------------------- files
def evaluation_dir(run: str | Path) -> Path:
    return Path(run) / "evaluation"


def write_evaluation(doc: dict, out_dir: str | Path) -> tuple[Path, Path]:
    """Write `evaluation.json` and the tidy `evaluation.csv` (rows of `doc["policies"]`) atomically into `out_dir`."""
    from npsco.io import atomic_write_json, atomic_write_text

    out = Path(out_dir)
    atomic_write_json(out / "evaluation.json", _json_ready(doc))
    atomic_write_text(out / "evaluation.csv", rows_to_csv(doc["policies"]))
    return out / "evaluation.json", out / "evaluation.csv"


def rows_to_csv(rows: list[dict]) -> str:
    """The tidy CSV text of per-policy rows (columns `CSV_COLUMNS`; empty cells where a value does not apply)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else _cell(row[c]) for c in CSV_COLUMNS])
    return buffer.getvalue()


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if not np.isfinite(value) else repr(round(value, 6))
    return str(value)


def _json_ready(obj):
    """NaN/inf -> None (JSON has no NaN); numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {k: _json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_ready(v) for v in obj]
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
    from npsco.io import read_json

    path = evaluation_dir(run) / "evaluation.json"
    if not path.exists():
        return None
    try:
        doc = read_json(path)
    except Exception:  # noqa: BLE001  (a damaged cache is recomputed)
        return None
    info = load_run(run)
    episodes = episodes or default_episodes(info.env_id)
    if doc.get("format_version") != EVALUATION_VERSION or doc.get("fingerprint") != run_fingerprint(info, episodes, seed):
        return None
    return doc


def evaluate_runs(runs: list[str | Path], episodes: int | None = None, seed: int = 0, reuse: bool = True,
                  write: bool = True, log=print, cache: MeasureCache | None = None) -> list[dict]:
    """Evaluate several population runs (sharing the measurements of common references); each run's document is
    reused from `RUN/evaluation/` when up to date (`reuse`) and written there when computed (`write`). `cache` keeps
    the measurements for the caller (the report's distance heatmap)."""
    cache = {} if cache is None else cache
    docs = []
    for run in runs:
        doc = cached_evaluation(run, episodes, seed) if reuse else None
        if doc is not None:
            log(f"{run}: evaluation up to date ({evaluation_dir(run) / 'evaluation.json'})")
        else:
            log(f"{run}: evaluating")
            doc = _json_ready(evaluate_run(run, episodes, seed, cache, log))
            if write:
                write_evaluation(doc, evaluation_dir(run))
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
    return {"format": EVALUATION_FORMAT + "-combined", "format_version": EVALUATION_VERSION,
            "runs": [d["run"] for d in docs], "commands": [d["command"] for d in docs],
            "policies": rows, "statistics": statistics(rows)}
