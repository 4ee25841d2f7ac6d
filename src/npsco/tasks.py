"""What npsco knows of a task: one `TaskSpec` per task family (the Four Reward Maze, Hopper, Walker2d, HalfCheetah,
and `other` for any other Gymnasium task), found from an env id by `task_spec`: its PPO presets, the novelty
constraint's t_S, how many deterministic episodes evaluate a policy and measure the default threshold. Imports nothing
from npsco, so that anything may import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAZE_ID = "npsco/FourRewardMaze-v0"
"""The Four Reward Maze, registered with Gymnasium by `npsco.envs`."""
MUJOCO_TASKS = ("Hopper", "Walker2d", "HalfCheetah")
"""The paper's MuJoCo tasks (any version npsco accepts: -v4, -v5)."""
ENV_BACKENDS = ("auto", "sync", "async", "envpool")
"""The vector-env backends a task can run on (`npsco.envs.make`); `envpool`: MuJoCo only, an optional package
(docs/environments.md)."""


@dataclass(frozen=True)
class TaskSpec:
    """The facts of one task family."""

    family: str
    """`maze`, `Hopper`, `Walker2d`, `HalfCheetah` or `other`."""
    default_preset: dict[str, Any] = field(default_factory=dict)
    """PPO settings of the `default` preset that differ from `PPOConfig`'s defaults."""
    paper_preset: dict[str, Any] = field(default_factory=dict)
    """PPO settings of the `paper` preset that differ from `PPOConfig`'s defaults (the paper's Appendix C)."""
    t_start: int = 20
    """The novelty constraint applies after this many steps of an episode (the paper's t_S)."""
    eval_episodes: int = 10
    """Deterministic episodes of a policy's evaluation."""
    distance_episodes: int = 5
    """Deterministic episodes per policy that measure the default threshold (distances between policies)."""


_MAZE_PPO = dict(
    total_timesteps=150_000,
    num_envs=16,
    num_steps=64,
    num_minibatches=4,
    update_epochs=10,
    learning_rate=1e-3,
    gamma=0.99,
    ent_coef=0.0,
    eval_every=10,
    eval_episodes=50,
    checkpoint_every=0,
)


def _paper_mujoco(actor_hidden: tuple[int, ...], steps: int) -> dict[str, Any]:
    """The paper's Appendix C: actor 32 -> hid, its budget; gamma and lambda of the authors' code."""
    return dict(actor_hidden=actor_hidden, total_timesteps=steps, gamma=0.995, gae_lambda=0.97)


TASKS: dict[str, TaskSpec] = {
    # the maze: its own small PPO budget in both presets; its episodes end in < 20 steps, hence t_S = 3; short
    # episodes, so many of them (the paper evaluates over 100)
    "maze": TaskSpec("maze", _MAZE_PPO, _MAZE_PPO, t_start=3, eval_episodes=100, distance_episodes=50),
    "Hopper": TaskSpec("Hopper", paper_preset=_paper_mujoco((32, 10), 1_000_000)),
    "Walker2d": TaskSpec("Walker2d", paper_preset=_paper_mujoco((32, 64), 1_600_000)),
    "HalfCheetah": TaskSpec("HalfCheetah", paper_preset=_paper_mujoco((32, 256), 3_000_000)),
    "other": TaskSpec("other"),
}
"""Every task family npsco knows, by name."""


def task_family(env_id: str) -> str:
    """`maze`, `Hopper`, `Walker2d`, `HalfCheetah` or `other` for an env id."""
    if env_id == MAZE_ID:
        return "maze"
    name = env_id.split("/")[-1].split("-")[0]
    return name if name in MUJOCO_TASKS else "other"


def task_spec(env_id: str) -> TaskSpec:
    """The `TaskSpec` of the task `env_id`."""
    return TASKS[task_family(env_id)]


def task_name(env_id: str) -> str:
    """The task's short name used in tables, figures and folders: the env id without its namespace or module
    (`npsco/FourRewardMaze-v0` -> `FourRewardMaze-v0`, `mytasks:Reach-v0` -> `Reach-v0`)."""
    return env_id.split(":")[-1].split("/")[-1]


def default_eval_episodes(env_id: str) -> int:
    """Deterministic evaluation episodes per policy: 100 on the maze (paper Sec. 4.1), 10 otherwise."""
    return task_spec(env_id).eval_episodes


def default_distance_episodes(env_id: str) -> int:
    """Deterministic episodes per policy for the default threshold: 50 on the maze (short episodes), 5 otherwise
    (MuJoCo's are 1000 steps)."""
    return task_spec(env_id).distance_episodes


def default_t_start(env_id: str) -> int:
    """The task's default t_S: 20 as the paper on MuJoCo; 3 on the maze (its episodes end in < 20 steps)."""
    return task_spec(env_id).t_start
