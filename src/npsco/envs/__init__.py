"""Environments: the Four Reward Maze, registered with gymnasium as ``MAZE_ID`` (single and vector entry points)."""

import gymnasium

from npsco.tasks import MAZE_ID

if MAZE_ID not in gymnasium.registry:
    gymnasium.register(
        MAZE_ID,
        entry_point="npsco.envs.maze:FourRewardMaze",
        vector_entry_point="npsco.envs.maze:FourRewardMazeVec",
    )

__all__ = ["MAZE_ID"]
