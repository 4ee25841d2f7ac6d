"""What npsco knows of a task from its id alone: the maze's id, the short name used in folders and tables, and how
many deterministic episodes evaluate a policy and measure the default threshold. Imports nothing, so that anything
may import it."""

from __future__ import annotations

MAZE_ID = "npsco/FourRewardMaze-v0"
"""The Four Reward Maze, registered with Gymnasium by `npsco.envs`."""


def task_name(env_id: str) -> str:
    """The task's short name used in tables, figures and folders: the env id without its namespace or module
    (`npsco/FourRewardMaze-v0` -> `FourRewardMaze-v0`, `mytasks:Reach-v0` -> `Reach-v0`)."""
    return env_id.split(":")[-1].split("/")[-1]


def default_eval_episodes(env_id: str) -> int:
    """Deterministic evaluation episodes per policy: 100 on the maze (paper Sec. 4.1), 10 otherwise."""
    return 100 if env_id == MAZE_ID else 10


def default_distance_episodes(env_id: str) -> int:
    """Deterministic episodes per policy for the default threshold: 50 on the maze (short episodes), 5 otherwise
    (MuJoCo's are 1000 steps)."""
    return 50 if env_id == MAZE_ID else 5
