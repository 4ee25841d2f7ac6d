"""CleanRL continuous-action PPO checkpoints (`ppo_continuous_action.py --save-model`: `torch.save(agent.state_dict())`)
-> `ImportedActor`.

The agent's actor is `actor_mean` (Linear, Tanh, Linear, Tanh, Linear) with a state-independent `actor_logstd`;
CleanRL's deterministic action is `actor_mean(obs)`, clipped by its `ClipAction` wrapper. CleanRL does not save its
observation normaliser (Gymnasium's `NormalizeObservation` inside the env), so the import has none unless statistics
are given (`--obs-norm`, an `.npz` with `mean` and `var`).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from npsco.errors import NpscoError
from npsco.importers.common import ImportedActor, ObsNormalizer, check_zip_sizes, torch_state_dict
from npsco.importers.sb3 import sequential
from npsco.io import read_bytes
from npsco.limits import MAX_IMPORT_BYTES

LOST_NORMALISER = (
    "CleanRL's observation normaliser (NormalizeObservation's running mean and variance is not in the "
    "checkpoint): the imported policy sees raw observations; pass --obs-norm with the statistics if "
    "you kept them"
)


def read_cleanrl(path: str | Path, seed: int = 0, with_obs_norm: bool = False) -> ImportedActor:
    """The actor of a CleanRL PPO state dict; NpscoError for other agents (discrete, Atari) or other files."""
    path = Path(path)
    state = torch_state_dict(read_bytes(path, MAX_IMPORT_BYTES), str(path))
    if "actor_mean.0.weight" not in state:
        if any(v.ndim == 4 for v in state.values()):
            raise NpscoError(f"{path}: a convolutional agent (image observations) is not supported")
        if "actor.0.weight" in state or "actor.weight" in state:
            raise NpscoError(
                f"{path}: an agent with discrete actions (CleanRL's ppo.py) is not supported; npsco "
                f"imports ppo_continuous_action.py's agent"
            )
        raise NpscoError(
            f"{path}: not a CleanRL continuous-action PPO agent (no actor_mean.0.weight; it has "
            f"{', '.join(sorted(state)[:6])})"
        )
    if "actor_logstd" not in state:
        raise NpscoError(f"{path}: the agent has no actor_logstd (not ppo_continuous_action.py's agent)")
    layers = sequential(state, "actor_mean")
    return ImportedActor(
        layers=layers,
        activation="tanh",
        output="linear",
        log_std=state["actor_logstd"].reshape(-1),
        method="cleanrl-ppo",
        seed=seed,
        source={"library": "cleanrl", "algorithm": "PPO (ppo_continuous_action)"},
        lost=[] if with_obs_norm else [LOST_NORMALISER],
    )


def read_obs_norm(path: str | Path) -> ObsNormalizer:
    """Observation statistics from an `.npz` (`mean`, `var`, optional `clip`, `eps`), read without pickle."""
    path = Path(path)
    raw = read_bytes(path, MAX_IMPORT_BYTES)
    if zipfile.is_zipfile(io.BytesIO(raw)):  # an .npz: refuse a zip bomb before numpy unpacks it
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            check_zip_sizes(archive, str(path))
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except Exception as e:  # noqa: BLE001
        raise NpscoError(f"{path}: not a readable .npz of observation statistics ({type(e).__name__}: {e})") from None
    if "mean" not in arrays or "var" not in arrays:
        raise NpscoError(f"{path}: needs arrays 'mean' and 'var' (it has {', '.join(arrays) or 'none'})")
    mean, var = arrays["mean"].astype(np.float64).reshape(-1), arrays["var"].astype(np.float64).reshape(-1)
    if mean.shape != var.shape or np.any(var < 0) or not np.all(np.isfinite(mean)) or not np.all(np.isfinite(var)):
        raise NpscoError(f"{path}: mean and var must be finite vectors of one size, var >= 0")
    clip = float(arrays["clip"]) if "clip" in arrays else 10.0
    eps = float(arrays["eps"]) if "eps" in arrays else 1e-8
    return ObsNormalizer(mean=mean, var=var, clip=clip, eps=eps)
