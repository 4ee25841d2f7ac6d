"""Deterministic (or sampled) episodes of one policy, run side by side in one vector env, with the visited states
kept for novelty measurements; and the evaluation of one checkpoint (`npsco evaluate CHECKPOINT`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from npsco.envs.lean import LeanSyncVectorEnv
from npsco.envs.make import final_observations, make_vector_env
from npsco.envs.maze import GOAL_NAMES, goal_of
from npsco.io import atomic_write_json
from npsco.policy import Policy, load_policy, resolve_checkpoint
from npsco.tasks import MAZE_ID, default_eval_episodes


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
        if self.final_obs is None:
            raise ValueError("trajectory() needs the episodes' states: run them with record_states=True")
        return np.concatenate([self.states[i], self.final_obs[i][None]], axis=0)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: mean, std, min, max of the returns, the mean length, and goal counts on the maze."""
        out: dict[str, Any] = {
            "episodes": int(self.returns.size),
            "seed": self.seed,
            "return_mean": float(self.returns.mean()),
            "return_std": float(self.returns.std()),
            "return_min": float(self.returns.min()),
            "return_max": float(self.returns.max()),
            "length_mean": float(self.lengths.mean()),
        }
        if self.goals is not None:
            out["goals"] = {name: int((self.goals == i).sum()) for i, name in enumerate(GOAL_NAMES)}
            out["goals"]["none"] = int((self.goals < 0).sum())
        return out


MAX_PARALLEL_EPISODES = 128
"""Episodes run side by side in one vector env (one environment each): more are run in groups of this many, one
group after the other, so that memory does not grow with the number of episodes (a MuJoCo env is ~1 MB)."""


def run_episodes(
    policy: Policy,
    episodes: int,
    seed: int = 0,
    env_id: str | None = None,
    max_episode_steps: int | None = None,
    deterministic: bool = True,
    record_states: bool = False,
    start: tuple[float, float] | Sequence[tuple[float, float]] | None = None,
    max_states: int | None = None,
) -> Episodes:
    """Run `episodes` episodes of `policy`, side by side in groups of at most `MAX_PARALLEL_EPISODES` (one vector env
    each, env i seeded `seed + i`), one episode per env.

    Actions are the clipped mean (deterministic) or clipped Gaussian samples drawn from a generator seeded with `seed`
    (for each group after the first, `seed` + its first episode). `start` fixes the maze's start position: one (x, y)
    for every episode, or one per episode. With `record_states`, at most `max_states` states are kept in all: those of
    the first episodes, whole, then the next one's first states (the later episodes' are left empty; None: every
    state).
    """
    env_id = env_id or policy.metadata["env_id"]
    per_episode = start is not None and np.ndim(start) == 2  # one start for each episode: split between the groups
    parts: list[Episodes] = []
    for first in range(0, episodes, MAX_PARALLEL_EPISODES):
        n = min(MAX_PARALLEL_EPISODES, episodes - first)
        kept = sum(int(len(s)) for part in parts for s in part.states)
        parts.append(
            _run_group(
                policy,
                n,
                seed + first,
                env_id,
                max_episode_steps,
                deterministic,
                record_states,
                _starts(start, first, n) if per_episode else start,
                None if max_states is None else max(0, max_states - kept),
            )
        )
    if len(parts) == 1:
        return parts[0]
    goals = [p.goals for p in parts if p.goals is not None]
    final = [p.final_obs for p in parts if p.final_obs is not None]
    return Episodes(
        returns=np.concatenate([p.returns for p in parts]),
        lengths=np.concatenate([p.lengths for p in parts]),
        seed=seed,
        goals=np.concatenate(goals) if goals else None,
        states=[s for p in parts for s in p.states],
        final_obs=np.concatenate(final) if final else None,
    )


def _starts(start: Any, first: int, n: int) -> list[tuple[float, float]]:
    """The start positions of episodes first .. first + n - 1, of one given per episode."""
    return [(float(x), float(y)) for x, y in np.asarray(start, np.float32)[first : first + n]]


def _run_group(
    policy: Policy,
    episodes: int,
    seed: int,
    env_id: str,
    max_episode_steps: int | None,
    deterministic: bool,
    record_states: bool,
    start: tuple[float, float] | Sequence[tuple[float, float]] | None,
    max_states: int | None,
) -> Episodes:
    """`run_episodes` for one group of episodes, side by side in one vector env."""
    envs = make_vector_env(env_id, episodes, max_episode_steps=max_episode_steps)
    rng = np.random.default_rng(seed)
    options = {"start": np.asarray(start, np.float32)} if start is not None else None
    obs, _ = envs.reset(seed=seed, options=options)
    returns = np.zeros(episodes)
    lengths = np.zeros(episodes, np.int64)
    running = np.ones(episodes, bool)
    goals = np.full(episodes, -1, np.int64) if env_id == MAZE_ID else None
    trajectories: list[list[np.ndarray]] = [[] for _ in range(episodes)]
    kept = 0  # states recorded so far
    last = episodes - 1  # past `max_states`, states go from the last episode that holds any (the first ones are kept)
    last_obs = np.zeros((episodes, obs.shape[1]), np.float32)
    # an episode that is over is not stepped again (the same returns: its rows of the policy's batch are unused)
    step = envs.step_some if isinstance(envs, LeanSyncVectorEnv) else lambda action, _running: envs.step(action)
    try:
        while running.any():
            action = policy.act(obs, deterministic=deterministic, rng=rng)
            if record_states:
                for i in np.flatnonzero(running):
                    if max_states is not None and kept >= max_states and i >= last:
                        continue  # (an episode at or after the one being cut keeps nothing more)
                    trajectories[i].append(obs[i].astype(np.float32))
                    kept += 1
                    while max_states is not None and kept > max_states:  # drop the latest episode's newest state
                        while not trajectories[last]:
                            last -= 1
                        trajectories[last].pop()
                        kept -= 1
            obs, reward, terminated, truncated, infos = step(action, running)
            returns[running] += reward[running]
            lengths[running] += 1
            ended = (terminated | truncated) & running
            if ended.any():
                if goals is not None:
                    final = final_observations(infos, ended, obs)
                    goals[ended] = goal_of(final[ended])
                if record_states:
                    last_obs[ended] = final_observations(infos, ended, obs)[ended]
                running &= ~ended
    finally:
        envs.close()
    empty = np.zeros((0, obs.shape[1]), np.float32)
    states = [np.stack(t) if t else empty for t in trajectories] if record_states else []
    return Episodes(
        returns=returns,
        lengths=lengths,
        seed=seed,
        goals=goals,
        states=states,
        final_obs=last_obs if record_states else None,
    )


def evaluate_checkpoint(
    checkpoint: str | Path, episodes: int | None = None, seed: int = 0, out: str | Path | None = None
) -> tuple[dict[str, Any], Path]:
    """`npsco evaluate CHECKPOINT`: deterministic episodes of one policy (`default_eval_episodes` of its task unless
    told), episode i on an env seeded `seed + i`; the summary and every return are written as JSON to `out` (default:
    beside the checkpoint, `.eval.json`). Returns the summary and where it was written."""
    path = resolve_checkpoint(checkpoint)
    policy = load_policy(path)
    env_id = policy.metadata["env_id"]
    episodes = episodes or default_eval_episodes(env_id)
    res = run_episodes(
        policy, episodes, seed=seed, max_episode_steps=policy.metadata.get("config", {}).get("max_episode_steps")
    )
    summary = {
        "checkpoint": str(path),
        "env_id": env_id,
        "deterministic": True,
        **res.summary(),
        "returns": [float(r) for r in res.returns],
    }
    written = Path(out) if out else path.with_suffix(".eval.json")
    atomic_write_json(written, summary)
    return summary, written
