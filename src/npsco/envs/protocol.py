"""What every npsco vector env shares (maze twin, envpool adapter; Gymnasium's vector envs follow it natively):
same-step autoreset, and `reset(options={"reset_mask": mask})` resetting only the masked sub-envs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def per_env_seeds(seed: int | Sequence[int | None] | None, num_envs: int) -> list[int | None]:
    """The seed of each sub-env for `reset(seed=...)`: sub-env i gets seed + i for one int, the list's i-th entry for a
    list (of num_envs entries), None (no reseeding) for None."""
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(num_envs)]
    if len(seed) != num_envs:
        raise ValueError(f"a list of seeds must have num_envs={num_envs} entries, got {len(seed)}")
    return [None if s is None else int(s) for s in seed]


def checked_reset_mask(reset_mask: Any, num_envs: int) -> np.ndarray:
    """The (num_envs,) bool mask of a `reset_mask` option (all envs when None), or a ValueError saying what is wrong."""
    if reset_mask is None:
        return np.ones(num_envs, dtype=bool)
    mask = np.asarray(reset_mask)
    if mask.dtype != np.bool_ or mask.shape != (num_envs,):
        raise ValueError(f"reset_mask must be a bool array of shape ({num_envs},), got {mask.dtype} {mask.shape}")
    if not mask.any():
        raise ValueError("reset_mask must select at least one environment")
    return mask
