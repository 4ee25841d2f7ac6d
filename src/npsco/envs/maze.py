"""Four Reward Maze (paper Sec. 4.1): a continuous 16 x 16 map with four rewarding disks on the edge midpoints.

``FourRewardMaze`` is the gymnasium environment; ``FourRewardMazeVec`` is its batched numpy twin, which gives the
same transitions as ``SyncVectorEnv`` of ``FourRewardMaze`` with same-step autoreset, for the same seeds and actions.
"""

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from npsco.envs.protocol import checked_reset_mask, per_env_seeds

MAP_SIZE = 16.0
"""Side of the square map [0, MAP_SIZE] x [0, MAP_SIZE]."""
GOAL_RADIUS = 1.0
"""Radius of each reward region."""
GOALS = (
    ("top", (8.0, 16.0), 5.0),
    ("bottom", (8.0, 0.0), 5.0),
    ("left", (0.0, 8.0), 10.0),
    ("right", (16.0, 8.0), 1.0),
)
"""(name, centre, reward) of each region; a goal's integer code is its index here, -1 means no goal."""
GOAL_NAMES = tuple(name for name, _, _ in GOALS)
STEP_PENALTY = -0.01
"""Reward of every step that does not enter a region."""


_CENTRES = np.array([centre for _, centre, _ in GOALS], dtype=np.float64)
_REWARDS = np.array([reward for _, _, reward in GOALS], dtype=np.float64)
_GOAL_COLOURS = np.array([(66, 133, 244), (52, 168, 83), (251, 188, 5), (171, 71, 188)], dtype=np.uint8)
"""RGB colour of each region in renders (top blue, bottom green, left yellow, right purple)."""


def goal_of(positions: np.ndarray) -> np.ndarray:
    """Integer code of the region containing each position (index into GOALS), -1 outside all regions.

    Args:
        positions: array of shape (..., 2) of (x, y) positions.

    Returns:
        int64 array of shape (...); a point exactly on a region's circle counts as inside.
    """
    positions = np.asarray(positions)
    squared_distances = ((positions[..., None, :] - _CENTRES) ** 2).sum(axis=-1)
    inside = squared_distances <= GOAL_RADIUS**2
    return np.where(inside.any(axis=-1), inside.argmax(axis=-1), -1)


def goal_name(code: int) -> str:
    """The name of a goal code of `goal_of` (`top`, `bottom`, `left`, `right`), `none` for -1."""
    return GOAL_NAMES[code] if code >= 0 else "none"


def _sample_start(rng: np.random.Generator) -> np.ndarray:
    """Uniform position on the map outside the regions, by rejection sampling (2 uniforms per try)."""
    while True:
        position = rng.uniform(0.0, MAP_SIZE, size=2).astype(np.float32)
        if goal_of(position) < 0:
            return position


def _checked_start(start: Any) -> np.ndarray:
    """The start position as a float32 (2,) array; ValueError unless it lies on the map and outside the regions."""
    position = np.array(start, dtype=np.float32)
    if position.shape != (2,):
        raise ValueError(f"start must be an (x, y) pair, got shape {position.shape}")
    if not np.all((position >= 0.0) & (position <= MAP_SIZE)):
        raise ValueError(f"start {tuple(position.tolist())} is outside the map [0, {MAP_SIZE}]^2")
    goal = int(goal_of(position))
    if goal >= 0:
        raise ValueError(f"start {tuple(position.tolist())} is inside the {GOAL_NAMES[goal]!r} reward region")
    return position


def _observation_space() -> spaces.Box:
    return spaces.Box(0.0, MAP_SIZE, shape=(2,), dtype=np.float32)


def _action_space() -> spaces.Box:
    return spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)


class FourRewardMaze(gym.Env[np.ndarray, np.ndarray]):
    """The Four Reward Maze: a point moving on a 16 x 16 map towards four rewarding disks.

    The observation is the agent's (x, y) position. An action is the displacement of one step: it is clipped to
    [-1, 1] per coordinate, then the new position is clipped to the map. Entering a region (distance to its centre
    <= GOAL_RADIUS after the move) gives that region's reward and terminates the episode; any other step gives
    STEP_PENALTY. The episode is truncated after ``max_steps`` steps (as gymnasium's TimeLimit does, a step that
    both enters a region and reaches the limit is terminated and truncated). ``info["goal"]`` is the code of the
    region entered at this step (-1 if none).

    Starts are uniform over the map outside the regions, or ``reset(options={"start": (x, y)})``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, max_steps: int = 100, render_mode: str | None = None, render_size: int = 256) -> None:
        """Args: max_steps: steps before truncation; render_mode: None or "rgb_array"; render_size: image side in
        pixels."""
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.render_size = render_size
        self.observation_space = _observation_space()
        self.action_space = _action_space()
        self._position = np.zeros(2, dtype=np.float32)
        self._steps = 0
        self._trajectory: list[np.ndarray] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode; ``options={"start": (x, y)}`` fixes the start, otherwise it is random."""
        super().reset(seed=seed)
        if options is not None and "start" in options:
            self._position = _checked_start(options["start"])
        else:
            self._position = _sample_start(self.np_random)
        self._steps = 0
        self._trajectory = [self._position]
        return self._position.copy(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move by the clipped action; see the class docstring for rewards and episode ends."""
        displacement = np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)
        if displacement.shape != (2,):
            raise ValueError(f"action must have shape (2,), got {displacement.shape}")
        self._position = np.clip(self._position + displacement, 0.0, MAP_SIZE).astype(np.float32)
        self._steps += 1
        self._trajectory.append(self._position)
        goal = int(goal_of(self._position))
        terminated = goal >= 0
        reward = float(_REWARDS[goal]) if terminated else STEP_PENALTY
        truncated = self._steps >= self.max_steps
        return self._position.copy(), reward, terminated, truncated, {"goal": goal}

    def render(self) -> np.ndarray | None:
        """With render_mode "rgb_array": an (H, W, 3) uint8 picture of the map, the regions and the trajectory so
        far."""
        if self.render_mode is None:
            return None
        return _draw(np.array(self._trajectory), self.render_size)


def _draw(trajectory: np.ndarray, size: int) -> np.ndarray:
    """Picture of the map (y upwards) with the regions, the trajectory as a dark polyline and its end as a red dot."""
    scale = size / MAP_SIZE
    image = np.full((size, size, 3), 245, dtype=np.uint8)
    pixel_centres = (np.arange(size) + 0.5) / scale
    xs, ys = np.meshgrid(pixel_centres, MAP_SIZE - pixel_centres)
    codes = goal_of(np.stack([xs, ys], axis=-1))
    inside = codes >= 0
    image[inside] = _GOAL_COLOURS[codes[inside]]

    segments = [
        np.linspace(start, end, int(np.ceil(np.linalg.norm(end - start) * scale)) + 1)
        for start, end in pairwise(trajectory)
    ]
    _stamp(image, np.concatenate([trajectory[:1], *segments]), scale, radius=1, colour=(40, 40, 40))
    _stamp(image, trajectory[-1:], scale, radius=3, colour=(220, 30, 30))
    return image


def _stamp(image: np.ndarray, points: np.ndarray, scale: float, radius: int, colour: tuple[int, int, int]) -> None:
    """Paint a square of side 2 * radius + 1 pixels around each map point."""
    size = image.shape[0]
    cols = np.floor(points[:, 0] * scale).astype(int)
    rows = np.floor((MAP_SIZE - points[:, 1]) * scale).astype(int)
    for dr in range(-radius, radius + 1):
        for dc in range(-radius, radius + 1):
            image[np.clip(rows + dr, 0, size - 1), np.clip(cols + dc, 0, size - 1)] = colour


class FourRewardMazeVec(VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """``num_envs`` Four Reward Mazes stepped together with numpy, autoresetting on the same step.

    Transitions are identical to ``SyncVectorEnv([FourRewardMaze] * num_envs, autoreset_mode=SAME_STEP)`` for the
    same seeds and actions: sub-environment i has its own generator, seeded with ``seed + i`` by ``reset(seed=seed)``
    (or with ``seed[i]`` for a list), and consumed exactly as ``FourRewardMaze`` consumes it.

    ``step`` infos: ``goal`` (int64 (N,), the region entered at this step, -1 if none; ``_goal`` all True);
    ``final_obs`` (float32 (N, 2), the last observation of the episodes that ended at this step, rows meaningful
    where ``_final_obs`` is True; the returned observation of those environments is already the next start);
    ``final_info`` = ``{"goal": ..., "_goal": ...}`` for the ended episodes, as SyncVectorEnv gives it.

    ``reset`` options: ``reset_mask`` (bool (N,) array: reset only these environments, the others keep their state)
    and ``start`` (an (x, y) pair or an (N, 2) array of start positions).
    """

    def __init__(self, num_envs: int, max_steps: int = 100) -> None:
        """Args: num_envs: number of mazes; max_steps: steps before an episode is truncated."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.num_envs = num_envs
        self.max_steps = max_steps
        self.single_observation_space = _observation_space()
        self.single_action_space = _action_space()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = None
        self._rngs: list[np.random.Generator | None] = [None] * num_envs
        self._positions = np.zeros((num_envs, 2), dtype=np.float32)
        self._steps = np.zeros(num_envs, dtype=np.int64)
        self._was_reset = np.zeros(num_envs, dtype=bool)

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset all environments, or those of ``options["reset_mask"]``; see the class docstring."""
        options = options or {}
        seeds = per_env_seeds(seed, self.num_envs)
        mask = self._checked_reset_mask(options.get("reset_mask"))
        starts = self._checked_starts(options["start"]) if "start" in options else None
        for i in np.flatnonzero(mask):
            if seeds[i] is not None:
                self._rngs[i], _ = seeding.np_random(seeds[i])
            self._positions[i] = starts[i] if starts is not None else _sample_start(self._rng(i))
        self._steps[mask] = 0
        self._was_reset[mask] = True
        return self._positions.copy(), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Move every maze by its clipped action; ended episodes restart at once (see the class docstring)."""
        if not self._was_reset.all():
            raise RuntimeError("call reset() before step(): some environments were never reset")
        displacements = np.clip(np.asarray(actions, dtype=np.float32), -1.0, 1.0)
        if displacements.shape != (self.num_envs, 2):
            raise ValueError(f"actions must have shape ({self.num_envs}, 2), got {displacements.shape}")
        self._positions = np.clip(self._positions + displacements, 0.0, MAP_SIZE).astype(np.float32)
        self._steps += 1
        goals = goal_of(self._positions)
        terminations = goals >= 0
        # _REWARDS[-1] is picked where goals == -1, but np.where discards it there.
        rewards = np.where(terminations, _REWARDS[goals], STEP_PENALTY)
        truncations = self._steps >= self.max_steps
        dones = terminations | truncations
        final_obs = self._positions.copy()
        for i in np.flatnonzero(dones):
            self._positions[i] = _sample_start(self._rng(i))
            self._steps[i] = 0
        infos = {
            "goal": goals,
            "_goal": np.ones(self.num_envs, dtype=bool),
            "final_obs": final_obs,
            "_final_obs": dones,
            "final_info": {"goal": goals.copy(), "_goal": dones.copy()},
        }
        return self._positions.copy(), rewards, terminations, truncations, infos

    def _rng(self, i: int | np.integer) -> np.random.Generator:
        """Generator of environment i, created from fresh entropy on first use (as gymnasium.Env.np_random)."""
        rng = self._rngs[i]
        if rng is None:
            rng, _ = seeding.np_random()
            self._rngs[i] = rng
        return rng

    def _checked_reset_mask(self, reset_mask: Any) -> np.ndarray:
        return checked_reset_mask(reset_mask, self.num_envs)

    def _checked_starts(self, start: Any) -> np.ndarray:
        starts = np.asarray(start, dtype=np.float32)
        if starts.shape not in ((2,), (self.num_envs, 2)):
            raise ValueError(f"start must have shape (2,) or ({self.num_envs}, 2), got {starts.shape}")
        return np.stack([_checked_start(row) for row in np.broadcast_to(starts, (self.num_envs, 2))])
