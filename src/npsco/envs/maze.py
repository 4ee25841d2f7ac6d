"""Four Reward Maze (paper Sec. 4.1): a continuous 16 x 16 map with four rewarding disks on the edge midpoints."""

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
