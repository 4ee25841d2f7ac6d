"""Stable-Baselines3's VecNormalize statistics (`VecNormalize.save(path)`, a pickle) -> an `ObsNormalizer`.

The pickle is read by `safe_pickle.load_records`: SB3's classes become inert records, nothing from the file runs.
Only the observation statistics are used (`obs_rms.mean`, `obs_rms.var`, `clip_obs`, `epsilon`, `norm_obs`); the
reward statistics concern training only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from npsco.errors import NpscoError
from npsco.importers.common import ObsNormalizer
from npsco.importers.safe_pickle import Record, load_records
from npsco.io import read_bytes
from npsco.limits import MAX_IMPORT_BYTES

VEC_NORMALIZE = "stable_baselines3.common.vec_env.vec_normalize.VecNormalize"
RUNNING_MEAN_STD = "stable_baselines3.common.running_mean_std.RunningMeanStd"


def read_vecnormalize(path: str | Path) -> ObsNormalizer | None:
    """The observation normaliser saved in a VecNormalize pickle; None when it did not normalise observations."""
    path = Path(path)
    if not path.is_file():
        raise NpscoError(f"{path}: no such VecNormalize file")
    obj = load_records(read_bytes(path, MAX_IMPORT_BYTES), str(path))
    if not isinstance(obj, Record) or obj.name != VEC_NORMALIZE:
        raise NpscoError(f"{path}: not a VecNormalize file (it holds {getattr(obj, 'name', type(obj).__name__)})")
    if not obj.field("norm_obs", True):
        return None
    rms = obj.field("obs_rms")
    if isinstance(rms, dict):
        raise NpscoError(f"{path}: normalises dict observations; npsco policies take one flat observation vector")
    if not isinstance(rms, Record) or rms.name != RUNNING_MEAN_STD:
        raise NpscoError(f"{path}: its obs_rms is not SB3's RunningMeanStd")
    mean, var = rms.field("mean"), rms.field("var")
    for name, value in (("mean", mean), ("var", var)):
        if not isinstance(value, np.ndarray) or value.dtype.kind != "f" or value.ndim != 1:
            raise NpscoError(f"{path}: obs_rms.{name} is not a vector of floats")
        if not np.all(np.isfinite(value)):
            raise NpscoError(f"{path}: obs_rms.{name} contains NaN or inf")
    if mean.shape != var.shape or np.any(var < 0):
        raise NpscoError(f"{path}: obs_rms has mismatched shapes or a negative variance")
    clip, eps = obj.field("clip_obs", 10.0), obj.field("epsilon", 1e-8)
    if not all(isinstance(v, (int, float)) and np.isfinite(v) and v > 0 for v in (clip, eps)):
        raise NpscoError(f"{path}: clip_obs and epsilon must be positive numbers, got {clip!r} and {eps!r}")
    return ObsNormalizer(mean=mean.astype(np.float64), var=var.astype(np.float64), clip=float(clip), eps=float(eps))
