"""Stable-Baselines3 `.zip` files (`model.save(path)`) -> `ImportedActor`, without unpickling anything.

The zip holds `data` (JSON; some fields are base64 pickles, which are never decoded: npsco reads only the JSON
fields beside them), `policy.pth` (the policy's state dict, read with `torch.load(weights_only=True)`) and files npsco
does not need (the optimiser, `pytorch_variables.pth`). Supported: PPO and A2C (`ActorCriticPolicy`), SAC and TD3 (and
DDPG) with MLP policies on flat Box observations and Box actions. The deterministic action is what SB3's
`model.predict(obs, deterministic=True)` returns:

- PPO/A2C: the Gaussian's mean (`action_net` after `mlp_extractor.policy_net`), clipped to the bounds;
- SAC: `tanh(mu)` rescaled to the bounds; TD3/DDPG: the actor's tanh output rescaled to the bounds.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from npsco.errors import NpscoError
from npsco.importers.common import ImportedActor, check_zip_sizes, read_zip_member, torch_state_dict
from npsco.io import parse_json, read_bytes
from npsco.limits import MAX_IMPORT_BYTES, MAX_JSON_BYTES

ACTIVATIONS = {"Tanh": "tanh", "ReLU": "relu"}
"""SB3 `activation_fn` class names npsco can run (the others are refused)."""


def is_sb3_zip(path: Path) -> bool:
    """Whether `path` is a zip archive with SB3's `data` and `policy.pth` entries."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    return {"data", "policy.pth"} <= names


def read_sb3(path: str | Path) -> ImportedActor:
    """The actor of an SB3 zip; NpscoError (one line) for what is not supported or not safe to read. The file and
    each member it unpacks are bounded (`npsco.limits.MAX_IMPORT_BYTES`; `data` as any JSON file), by their declared
    and their actual size, before anything is unpacked."""
    path = Path(path)
    raw = read_bytes(path, MAX_IMPORT_BYTES)
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            names = set(z.namelist())
            if not {"data", "policy.pth"} <= names:
                raise NpscoError(f"{path}: not a Stable-Baselines3 model (the zip lacks data or policy.pth)")
            check_zip_sizes(z, str(path))
            data = parse_json(read_zip_member(z, "data", f"{path}", MAX_JSON_BYTES), f"{path}:data")
            weights = read_zip_member(z, "policy.pth", str(path))
            version = (
                read_zip_member(z, "_stable_baselines3_version", str(path), 256).decode(errors="replace").strip()
                if ("_stable_baselines3_version" in names)
                else "unknown"
            )
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise NpscoError(f"{path}: not a readable Stable-Baselines3 zip ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise NpscoError(f"{path}: its data entry is not a JSON object")
    check_spaces(data, path)
    state = torch_state_dict(weights, f"{path}:policy.pth")
    check_features_extractor(state, path)
    if "action_net.weight" in state:
        return _actor_critic(data, state, path, version)
    if "actor.latent_pi.0.weight" in state or "actor.mu.weight" in state:
        return _sac(data, state, path, version)
    if "actor.mu.0.weight" in state:
        return _td3(data, state, path, version)
    raise NpscoError(
        f"{path}: unknown policy architecture (policy.pth has {', '.join(sorted(state)[:6])}, ...); "
        f"npsco imports PPO, A2C, SAC and TD3 MLP policies"
    )


# ---------------------------------------------------------------------------------------------------------- checks
def _space_type(space: Any) -> str:
    """The class name of a space in `data` (`"<class 'gymnasium.spaces.box.Box'>"` -> `Box`), read from JSON."""
    kind = space.get(":type:", "") if isinstance(space, dict) else ""
    match = re.search(r"\.(\w+)'>$", kind)
    return match.group(1) if match else "unknown"


def check_spaces(data: dict, path: Path) -> None:
    """Refuse what npsco policies cannot act on: non-Box actions, image or dict observations."""
    act, obs = data.get("action_space") or {}, data.get("observation_space") or {}
    kind = _space_type(act)
    if kind != "Box":
        raise NpscoError(f"{path}: {kind} actions are not supported (npsco policies act in continuous Box spaces)")
    kind = _space_type(obs)
    if kind != "Box":
        raise NpscoError(f"{path}: {kind} observations are not supported (npsco policies take one flat Box vector)")
    shape = obs.get("_shape") or obs.get("shape")
    if isinstance(shape, list) and len(shape) != 1:
        what = "image observations" if len(shape) == 3 else f"observations of shape {tuple(shape)}"
        raise NpscoError(f"{path}: {what} are not supported (npsco policies take one flat observation vector)")


def check_features_extractor(state: dict[str, np.ndarray], path: Path) -> None:
    """A features extractor with weights (NatureCNN on images, or a custom one) is not an MLP on the observations."""
    learned = sorted(k for k in state if "features_extractor." in k)
    if learned:
        what = "a CNN on image observations" if any(state[k].ndim == 4 for k in learned) else "a learned extractor"
        raise NpscoError(
            f"{path}: the policy has a features extractor with weights ({what}: {learned[0]}, ...); "
            f"npsco imports MLP policies on flat observations"
        )


def activation(data: dict, default: str, path: Path) -> str:
    """The hidden activation from `policy_kwargs.activation_fn`, read from its JSON string (never unpickled)."""
    kwargs = data.get("policy_kwargs")
    text = kwargs.get("activation_fn") if isinstance(kwargs, dict) else None
    if not text:
        return default
    name = re.sub(r"^<class '(?:[\w.]+\.)?(\w+)'>$", r"\1", str(text))
    if name not in ACTIVATIONS:
        raise NpscoError(f"{path}: activation {name} is not supported (npsco runs {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]


def sequential(state: dict[str, np.ndarray], prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """The linear layers of a torch `nn.Sequential` in a state dict, in order (`prefix.{i}.weight` / `.bias`)."""
    found = sorted(int(m.group(1)) for k in state if (m := re.fullmatch(re.escape(prefix) + r"\.(\d+)\.weight", k)))
    layers = []
    for i in found:
        w, b = state[f"{prefix}.{i}.weight"], state.get(f"{prefix}.{i}.bias")
        if w.ndim != 2 or b is None:
            raise NpscoError(f"{prefix}.{i} is not a linear layer with a bias (shape {w.shape})")
        layers.append((w, b))
    return layers


def _provenance(algorithm: str, version: str, data: dict) -> dict[str, Any]:
    """The `ImportedActor` fields every SB3 algorithm fills alike: its method name, seed, steps and source."""
    steps, seed = int(data.get("num_timesteps") or 0), data.get("seed")
    return {
        "method": f"sb3-{algorithm.lower()}",
        "seed": int(seed) if isinstance(seed, int) else 0,
        "global_step": steps,
        "source": {
            "library": "stable-baselines3",
            "library_version": version,
            "algorithm": algorithm,
            "num_timesteps": steps,
        },
    }


# ------------------------------------------------------------------------------------------------------ algorithms
def _actor_critic(data: dict, state: dict, path: Path, version: str) -> ImportedActor:
    """PPO / A2C: shared layers (SB3 < 1.8), the policy branch, then `action_net`; `log_std` state-independent."""
    algorithm = "PPO" if "clip_range" in data else "A2C"
    layers = (
        sequential(state, "mlp_extractor.shared_net")
        + sequential(state, "mlp_extractor.policy_net")
        + [(state["action_net.weight"], state["action_net.bias"])]
    )
    log_std = state.get("log_std")
    kwargs = data.get("policy_kwargs")
    kwargs = kwargs if isinstance(kwargs, dict) else {}
    lost, output = [], "tanh" if kwargs.get("squash_output") else "linear"
    if log_std is None:
        raise NpscoError(f"{path}: the policy has no log_std: discrete actions are not supported")
    if data.get("use_sde") or log_std.ndim != 1:
        lost.append(
            "gSDE's state-dependent exploration noise: the imported policy acts deterministically (its mean action)"
        )
        log_std = None
    return ImportedActor(
        layers=layers,
        activation=activation(data, "tanh", path),
        output=output,
        log_std=log_std,
        lost=lost,
        **_provenance(algorithm, version, data),
    )


def _sac(data: dict, state: dict, path: Path, version: str) -> ImportedActor:
    """SAC (and sb3-contrib's TQC, whose actor is SAC's): `actor.latent_pi` then `actor.mu`, squashed by tanh; its
    std depends on the state (`actor.log_std`)."""
    algorithm = "TQC" if "top_quantiles_to_drop_per_net" in data else "SAC"
    if "actor.mu.weight" not in state:  # with gSDE, mu is Sequential(Linear, Hardtanh(-clip_mean, clip_mean))
        raise NpscoError(
            f"{path}: {algorithm} with gSDE clips its mean before the tanh (clip_mean), which npsco "
            f"checkpoints cannot describe; not supported"
        )
    layers = sequential(state, "actor.latent_pi") + [(state["actor.mu.weight"], state["actor.mu.bias"])]
    return ImportedActor(
        layers=layers,
        activation=activation(data, "relu", path),
        output="tanh",
        log_std=None,
        lost=[
            f"{algorithm}'s state-dependent standard deviation: the imported policy acts deterministically (tanh "
            f"of its mean, {algorithm}'s deterministic action)"
        ],
        **_provenance(algorithm, version, data),
    )


def _td3(data: dict, state: dict, path: Path, version: str) -> ImportedActor:
    """TD3 / DDPG: `actor.mu` is Linear, activation, ..., Linear, Tanh; deterministic by design."""
    algorithm = "DDPG" if data.get("policy_delay") == 1 and not data.get("target_policy_noise") else "TD3"
    return ImportedActor(
        layers=sequential(state, "actor.mu"),
        activation=activation(data, "relu", path),
        output="tanh",
        log_std=None,
        lost=[f"{algorithm}'s exploration noise (not part of its policy): the imported policy acts deterministically"],
        **_provenance(algorithm, version, data),
    )
