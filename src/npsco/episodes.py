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
    # an episode that is over is not stepped again (the same returns: its rows of the policy's batch are unused)
    step = envs.step_some if isinstance(envs, LeanSyncVectorEnv) else lambda action, _running: envs.step(action)
    try:
        while running.any():
            action = policy.act(obs, deterministic=deterministic, rng=rng)
            if record_states:
                for i in np.flatnonzero(running):
                    trajectories[i].append(obs[i].astype(np.float32))
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
    states = [np.stack(t) for t in trajectories] if record_states else []
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
