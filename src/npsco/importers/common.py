"""What the importers share: the task's spaces, the observation normaliser, and the npsco `Policy` they build."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import torch

from npsco.envs.make import check_task
from npsco.errors import NpscoError
from npsco.io import file_sha256
from npsco.limits import MAX_IMPORT_BYTES
from npsco.policy import OBS_NORM_EPS, Policy, space_metadata


@dataclass
class ObsNormalizer:
    """Observation statistics to apply before the network: clip((obs - mean) / sqrt(var + eps), -clip, clip)."""

    mean: np.ndarray
    """Running mean of the raw observations, shape (obs_dim,)."""
    var: np.ndarray
    """Running (population) variance, shape (obs_dim,)."""
    clip: float = 10.0
    """Bound of the normalised observations."""
    eps: float = OBS_NORM_EPS
    """Added to the variance under the square root."""

    def stored_var(self) -> np.ndarray:
        """The variance to store so that npsco's fixed eps (1e-8) gives the same denominator: var + eps - 1e-8."""
        return np.asarray(self.var, np.float64) + (self.eps - OBS_NORM_EPS)


@dataclass
class ImportedActor:
    """An actor read from another library, in npsco's terms (weights as (out, in) matrices, PyTorch's convention)."""

    layers: list[tuple[np.ndarray, np.ndarray]]
    """The mean network's linear layers, input first."""
    activation: str
    """`tanh` or `relu` between the layers."""
    output: str
    """`linear` (the mean, clipped to the bounds) or `tanh` (squashed into the bounds)."""
    log_std: np.ndarray | None
    """State-independent log-std (act_dim,), or None when the imported policy acts deterministically."""
    method: str
    """What trained it, for the checkpoint's `method` field, e.g. `sb3-ppo`, `cleanrl-ppo`."""
    seed: int = 0
    global_step: int = 0
    source: dict[str, Any] = field(default_factory=dict)
    """Where it came from (library, algorithm, version): the checkpoint's `imported` field."""
    lost: list[str] = field(default_factory=list)
    """What the npsco policy does not keep of the original, one sentence each (printed and stored)."""


def check_zip_sizes(archive: zipfile.ZipFile, source: str, limit: int = MAX_IMPORT_BYTES) -> None:
    """Refuse a zip archive whose members would unpack to more than `limit` bytes in all, by their declared sizes
    (a zip bomb: a few MB that unpack to GBs), before anything is unpacked."""
    total = 0
    for info in archive.infolist():
        total += info.file_size
        if total > limit:
            raise NpscoError(
                f"{source}: {info.filename} unpacks to {info.file_size:,} bytes, past npsco's limit of {limit:,} for "
                "an imported file; refused"
            )


def read_zip_member(archive: zipfile.ZipFile, name: str, source: str, limit: int = MAX_IMPORT_BYTES) -> bytes:
    """One member of a zip archive, unpacked to at most `limit` bytes whatever its header declares."""
    with archive.open(name) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise NpscoError(f"{source}: {name} unpacks to more than {limit:,} bytes, past npsco's limit; refused")
    return data


def not_torch_file(data: bytes) -> str | None:
    """What a file is, in words, when it cannot be a `torch.save` file (a zip archive, or a pickle before PyTorch
    1.6): `a text file`, `a safetensors file ...`; None when it can be one."""
    if data[:1] == b"\x80":  # pickle protocol >= 2 starts with 0x80
        return None
    if zipfile.is_zipfile(io.BytesIO(data)):  # torch.save's zip holds FOLDER/data.pkl; an SB3 model, data + policy.pth
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
        if any(n.count("/") == 1 and n.endswith("/data.pkl") for n in names):
            return None
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "") if names else "nothing"
        return f"a zip archive of {shown}: neither an SB3 model (data, policy.pth) nor a torch.save file (data.pkl)"
    if not data:
        return "an empty file"
    header = int.from_bytes(data[:8], "little")
    if len(data) >= 8 and 0 < header < len(data) and data[8:9] == b"{":
        return "a safetensors file: an npsco checkpoint is used as it is, without import"
    text = data[:4096].decode("utf-8", errors="replace").rstrip("\ufffd")  # (a character cut at the end is fine)
    printable = all(c.isprintable() or c in "\t\n\r\f\v" for c in text) and "\ufffd" not in text
    return "a text file" if printable else "a binary file of an unknown format"


def torch_state_dict(data: bytes, source: str) -> dict[str, np.ndarray]:
    """A `torch.save`d state dict as float32 numpy arrays, read with `weights_only=True` (PyTorch's restricted
    unpickler: tensors and plain containers only; a file that names any other code is refused). A file that is no
    `torch.save` file at all (text, say) is refused saying so; a zip file (the format of `torch.save`) that would
    unpack to more than `MAX_IMPORT_BYTES` is refused before it is read."""
    kind = not_torch_file(data)
    if kind is not None:
        raise NpscoError(
            f"{source}: not a PyTorch or Stable-Baselines3 checkpoint ({kind}); npsco imports an SB3 model .zip or a "
            "CleanRL torch.save file"
        )
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            check_zip_sizes(archive, source)
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001  (includes pickle payloads that weights_only refuses)
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise NpscoError(f"{source}: refused: not a plain PyTorch state dict ({first})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise NpscoError(f"{source}: not a PyTorch state dict (a mapping of names to tensors)")
    return {k: v.detach().to(torch.float32).numpy() for k, v in state.items()}


def build_policy(
    actor: ImportedActor, env_id: str, norm: ObsNormalizer | None, file: Path, norm_file: Path | None = None
) -> Policy:
    """The npsco policy of an imported actor on task `env_id` (`norm` read from `norm_file`); refuses weights whose
    sizes do not fit the task."""
    obs_space, act_space = check_task(env_id)  # flat Box spaces, finite action bounds
    obs_dim, act_dim = int(np.prod(obs_space.shape)), int(np.prod(act_space.shape))
    w_in, w_out = actor.layers[0][0].shape[1], actor.layers[-1][0].shape[0]
    if (w_in, w_out) != (obs_dim, act_dim):
        raise NpscoError(
            f"{file}: the network maps {w_in} observations to {w_out} actions, but {env_id} has "
            f"{obs_dim} observations and {act_dim} actions (wrong --env?)"
        )
    for k, ((w, b), (w_next, _)) in enumerate(pairwise(actor.layers)):
        if w.shape[0] != w_next.shape[1] or b.shape != (w.shape[0],):
            raise NpscoError(f"{file}: layer {k} ({w.shape}) does not feed layer {k + 1} ({w_next.shape})")
    if norm is not None and (norm.mean.shape != (obs_dim,) or norm.var.shape != (obs_dim,)):
        raise NpscoError(
            f"the observation statistics have shape {norm.mean.shape}, but {env_id} has {obs_dim} observations"
        )
    arrays = [a for layer in actor.layers for a in layer] + ([] if actor.log_std is None else [actor.log_std])
    if not all(np.all(np.isfinite(a)) for a in arrays):
        raise NpscoError(f"{file}: the weights contain NaN or inf")
    low, high = np.asarray(act_space.low, np.float32), np.asarray(act_space.high, np.float32)
    metadata = {
        "env_id": env_id,
        "observation_space": space_metadata(obs_space),
        "action_space": space_metadata(act_space),
        "method": actor.method,
        "seed": int(actor.seed),
        "method_config": {},
        "training": {"global_step": int(actor.global_step), "iteration": 0},
        "imported": {
            **actor.source,
            "file": str(file.resolve()),
            "sha256": file_sha256(file),
            "obs_norm_file": str(norm_file.resolve()) if norm is not None and norm_file else None,
            "imported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "lost": actor.lost,
        },
    }
    return Policy(
        weights=[(np.ascontiguousarray(w, np.float32), np.ascontiguousarray(b, np.float32)) for w, b in actor.layers],
        log_std=(
            np.full(act_dim, -np.inf, np.float32)
            if actor.log_std is None
            else np.asarray(actor.log_std, np.float32).reshape(act_dim)
        ),
        obs_mean=(np.zeros(obs_dim) if norm is None else norm.mean).astype(np.float32),
        obs_var=(np.ones(obs_dim) if norm is None else norm.stored_var()).astype(np.float32),
        obs_clip=10.0 if norm is None else float(norm.clip),
        norm_obs=norm is not None,
        action_low=low,
        action_high=high,
        metadata=metadata,
        activation=actor.activation,
        output=actor.output,
    )
