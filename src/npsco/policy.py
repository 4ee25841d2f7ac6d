"""The `Policy` snapshot (a numpy policy: no torch) and its safe checkpoint format.

A checkpoint is ONE `.safetensors` file: the actor's weights, log-std, observation-normalisation statistics and action
bounds as tensors, and everything else as JSON in the safetensors header (key `"npsco"`). Loading parses the header with
the safetensors library (no pickle, no code execution) and validates every field; see docs/checkpoints.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from npsco.errors import NpscoError
from npsco.forward import RELU, TANH, actor_means
from npsco.io import NotFiniteNumber, atomic_write_bytes, check_nesting, loads_finite, read_bytes
from npsco.layout import MANIFEST_FILE, NOVEL_FOLDER, POLICY_FILE, reference_path
from npsco.limits import MAX_CHECKPOINT_BYTES, MAX_CHECKPOINT_HEADER_BYTES, MAX_EPISODE_STEPS, check_at_most
from npsco.task_ids import CheckpointTaskId

FORMAT = "npsco-policy"
FORMAT_VERSIONS = (1, 2)
"""The versions npsco reads: 1 is what it writes for the policies it trains (tanh MLP, linear output,
state-independent log-std); 2 adds other activations, a tanh-squashed output and deterministic policies (imports).
`Policy.format_version` says which a policy is written as."""
OBS_NORM_EPS = 1e-8
ACTIVATIONS = ("tanh", "relu")
"""Hidden-layer activations a checkpoint may name (`architecture.activation`)."""
OUTPUTS = ("linear", "tanh")
"""`linear`: the last layer's output is the mean; `tanh`: it is squashed into the action bounds (SAC, TD3)."""
LOG_STDS = ("state-independent", "none")
"""`none`: a deterministic policy (no `actor.log_std`; its action noise has std 0)."""


def mlp_forward(layers: Sequence[tuple[np.ndarray, np.ndarray]], x: np.ndarray, activation: str = "tanh") -> np.ndarray:
    """Numpy forward pass of an MLP given its (W (out, in), b) layers: `activation` (tanh or relu) after every layer
    but the last, which is linear."""
    for i, (w, b) in enumerate(layers):
        x = x @ w.T + b
        if i < len(layers) - 1:
            x = np.tanh(x) if activation == "tanh" else np.maximum(x, 0, dtype=x.dtype)
    return x


def squash(u: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """tanh-squash into the bounds, as Stable-Baselines3 unscales a SAC/TD3 action:
    low + (tanh(u) + 1) / 2 (high - low)."""
    return low + (0.5 * (np.tanh(u) + 1.0) * (high - low))


@dataclass(frozen=True)
class _Packed:
    """A policy's arrays as `npsco.forward.actor_means` reads them."""

    norm: np.ndarray
    """(2, D) float64: the observation mean and sqrt(var + eps); (0, D) without normalisation."""
    weights: tuple[np.ndarray, ...]
    """Per layer W^T, (in, out) float32, C-contiguous."""
    biases: tuple[np.ndarray, ...]
    bounds: np.ndarray
    """(2, A) float32: the action bounds."""

    @staticmethod
    def of(policy: Policy) -> _Packed:
        d = policy.obs_dim
        norm = (
            np.stack([policy.obs_mean.astype(np.float64), np.sqrt(policy.obs_var.astype(np.float64) + OBS_NORM_EPS)])
            if policy.norm_obs
            else np.zeros((0, d))
        )
        return _Packed(
            norm=np.ascontiguousarray(norm.reshape(-1, d)),
            weights=tuple(np.ascontiguousarray(w.T, np.float32) for w, _ in policy.weights),
            biases=tuple(np.ascontiguousarray(b, np.float32) for _, b in policy.weights),
            bounds=np.ascontiguousarray(np.stack([policy.action_low, policy.action_high]), np.float32),
        )


@dataclass
class Policy:
    """A frozen policy: numpy weights, its observation normaliser and action bounds. Cheap to call, safe to share.

    Call it with **raw** observations (it normalises them itself), one `(obs_dim,)` or a batch `(N, obs_dim)`.
    """

    weights: list[tuple[np.ndarray, np.ndarray]]
    """Actor mean MLP layers (W of shape (out, in), b) — `activation` between layers, the last is linear."""
    log_std: np.ndarray
    """State-independent log standard deviation, shape (action_dim,); -inf for a deterministic policy."""
    obs_mean: np.ndarray
    obs_var: np.ndarray
    obs_clip: float
    norm_obs: bool
    action_low: np.ndarray
    action_high: np.ndarray
    metadata: dict[str, Any]
    activation: str = "tanh"
    """Hidden-layer activation: `tanh` (npsco, PPO) or `relu` (e.g. SB3's SAC and TD3, RL Zoo models)."""
    output: str = "linear"
    """`linear`: the last layer gives the Gaussian's mean; `tanh`: it is squashed into the action bounds (`squash`)."""
    _packed_arrays: tuple[tuple, _Packed] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def deterministic_only(self) -> bool:
        """True for a policy without action noise (an imported SAC/TD3 actor): `act` returns its mean action."""
        return bool(np.all(np.isneginf(self.log_std)))

    @property
    def format_version(self) -> int:
        """1 when the version-1 format describes the policy (every policy npsco trains), else 2."""
        plain = self.activation == "tanh" and self.output == "linear" and not self.deterministic_only
        return 1 if plain else 2

    @property
    def obs_dim(self) -> int:
        return int(self.weights[0][0].shape[1])

    @property
    def action_dim(self) -> int:
        return int(self.weights[-1][0].shape[0])

    @property
    def action_std(self) -> np.ndarray:
        """Standard deviation of the Gaussian action noise, shape (action_dim,)."""
        return np.exp(self.log_std)

    @property
    def observation_space(self) -> gym.spaces.Box:
        s = self.metadata["observation_space"]
        low = np.array([-np.inf if v is None else v for v in s["low"]], np.float32).reshape(s["shape"])
        high = np.array([np.inf if v is None else v for v in s["high"]], np.float32).reshape(s["shape"])
        return gym.spaces.Box(low, high, dtype=np.float32)

    @property
    def action_space(self) -> gym.spaces.Box:
        return gym.spaces.Box(self.action_low, self.action_high, dtype=np.float32)

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """Raw observations -> the network's float32 input (computed in float64, as SB3's VecNormalize does)."""
        if not self.norm_obs:
            return np.asarray(obs, np.float32)
        x = (np.asarray(obs, np.float64) - self.obs_mean) / np.sqrt(self.obs_var.astype(np.float64) + OBS_NORM_EPS)
        return np.clip(x, -self.obs_clip, self.obs_clip).astype(np.float32)

    def raw_mean(self, obs: np.ndarray) -> np.ndarray:
        """The Gaussian's mean before clipping to the action bounds (squashed into them for a `tanh` output)."""
        return self._forward(obs, clip_to_bounds=False)

    def mean_action(self, obs: np.ndarray) -> np.ndarray:
        """The deterministic action that is executed: the mean clipped to the action bounds.

        Each observation's action is computed alone (`npsco.forward.actor_means`): the same bits for one observation
        as for the same one inside a batch of any size."""
        return self._forward(obs, clip_to_bounds=True)

    def _forward(self, obs: np.ndarray, clip_to_bounds: bool) -> np.ndarray:
        obs = np.asarray(obs)
        if obs.ndim not in (1, 2) or obs.shape[-1] != self.obs_dim:
            raise ValueError(
                f"observations of shape {obs.shape}: the policy takes ({self.obs_dim},) or (N, {self.obs_dim})"
            )
        rows = np.ascontiguousarray(obs.reshape(-1, self.obs_dim), np.float64)
        packed = self._packed()
        out = np.empty((rows.shape[0], self.action_dim), np.float32)
        actor_means(
            rows,
            packed.norm,
            float(self.obs_clip),
            packed.weights,
            packed.biases,
            TANH if self.activation == "tanh" else RELU,
            packed.bounds,
            self.output == "tanh",
            clip_to_bounds,
            out,
        )
        return out[0] if obs.ndim == 1 else out

    def _packed(self) -> _Packed:
        """The arrays `actor_means` reads, made again whenever a field was replaced (assign a new array, or use
        `dataclasses.replace`; an array changed in place is not seen: a Policy is a snapshot)."""
        key = (
            tuple((id(w), id(b)) for w, b in self.weights),
            id(self.obs_mean),
            id(self.obs_var),
            self.obs_clip,
            self.norm_obs,
            id(self.action_low),
            id(self.action_high),
        )
        if self._packed_arrays is None or self._packed_arrays[0] != key:
            self._packed_arrays = (key, _Packed.of(self))
        return self._packed_arrays[1]

    def act(self, obs: np.ndarray, deterministic: bool = False, rng: np.random.Generator | None = None) -> np.ndarray:
        """An action to execute: the clipped mean, or a clipped Gaussian sample (pass `rng` for reproducibility)."""
        if deterministic:
            return self.mean_action(obs)
        mean = self.raw_mean(obs)
        rng = rng if rng is not None else np.random.default_rng()
        sample = mean + self.action_std * rng.standard_normal(mean.shape)
        return np.clip(sample, self.action_low, self.action_high).astype(np.float32)

    __call__ = mean_action

    # ------------------------------------------------------------------ construction and files
    def tensors(self) -> dict[str, np.ndarray]:
        out = {}
        for i, (w, b) in enumerate(self.weights):
            out[f"actor.{i}.weight"], out[f"actor.{i}.bias"] = w, b
        if not self.deterministic_only:
            out["actor.log_std"] = self.log_std
        out.update(
            {
                "obs_norm.mean": self.obs_mean,
                "obs_norm.var": self.obs_var,
                "action.low": self.action_low,
                "action.high": self.action_high,
            }
        )
        return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}

    def save(self, path: str | os.PathLike) -> Path:
        """Write the checkpoint atomically to `path` (a `.safetensors` file)."""
        meta = dict(self.metadata)
        meta.update(
            format=FORMAT,
            format_version=self.format_version,
            architecture={
                "actor_hidden": [int(w.shape[0]) for w, _ in self.weights[:-1]],
                "activation": self.activation,
                "output": self.output,
                "log_std": "none" if self.deterministic_only else "state-independent",
            },
            obs_norm={"enabled": self.norm_obs, "clip": self.obs_clip, "eps": OBS_NORM_EPS},
            action_clip=True,
        )
        meta.setdefault("created", datetime.now(UTC).isoformat(timespec="seconds"))
        self.metadata = meta
        path = Path(path)
        atomic_write_bytes(
            path, save_safetensors(self.tensors(), metadata={"npsco": json.dumps(meta, allow_nan=False)})
        )
        return path


REQUIRED_METADATA = (
    "format",
    "format_version",
    "env_id",
    "observation_space",
    "action_space",
    "architecture",
    "obs_norm",
    "method",
    "seed",
)


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """Accept a checkpoint file or a folder holding `policy.safetensors`."""
    p = Path(path)
    if p.is_dir():
        if (p / MANIFEST_FILE).exists():
            raise NpscoError(
                f"{path} is a population run, not one policy: give one of its policies ({path}/{reference_path(0)}, "
                f"{path}/{NOVEL_FOLDER}/...; its manifest lists them)"
            )
        if not (p / POLICY_FILE).exists():
            raise NpscoError(f"{path} is a folder without {POLICY_FILE}: no finished policy there (yet)")
        p = p / POLICY_FILE
    if not p.exists():
        raise NpscoError(f"{path}: no such checkpoint")
    return p


def load_policy(path: str | os.PathLike) -> Policy:
    """Load a `Policy` from a checkpoint without unpickling anything; refuse invalid files with a clear message.

    `path` is a `.safetensors` checkpoint written by npsco, or a folder holding `policy.safetensors`. The returned
    policy takes raw observations: `mean_action(obs)`, `act(obs, deterministic=False)`, `action_std`, `metadata`.
    A file that is not a regular one, or larger than `npsco.limits.MAX_CHECKPOINT_BYTES`, is refused before it is
    read. The task id of its metadata is a `npsco.task_ids.CheckpointTaskId`: it never chooses code to run.
    """
    p = resolve_checkpoint(path)
    raw = read_bytes(p, MAX_CHECKPOINT_BYTES)
    header_len = int.from_bytes(raw[:8], "little")
    if MAX_CHECKPOINT_HEADER_BYTES < header_len <= len(raw) - 8:  # (one longer than the file is not a checkpoint)
        raise NpscoError(
            f"{p}: its header (metadata) is {header_len:,} bytes, past npsco's limit of "
            f"{MAX_CHECKPOINT_HEADER_BYTES:,} for a checkpoint's; refused"
        )
    try:
        tensors = load_safetensors(raw)
        header = json.loads(raw[8 : 8 + header_len])
    except Exception as e:  # noqa: BLE001  (any parse failure of an untrusted file is a refusal, never a crash)
        raise NpscoError(f"{p}: not a valid safetensors checkpoint ({type(e).__name__}: {str(e)[:120]})") from None
    text = header.get("__metadata__", {}).get("npsco") if isinstance(header, dict) else None
    try:
        meta = loads_finite(text) if isinstance(text, str) else None
    except RecursionError:
        raise NpscoError(f"{p}: checkpoint metadata nested too deeply; refused") from None
    except NotFiniteNumber as e:
        raise NpscoError(f"{p}: checkpoint metadata: {e}; refused") from None
    except ValueError:  # not JSON: no npsco metadata
        meta = None
    check_nesting(meta, f"{p}: checkpoint metadata")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise NpscoError(f"{p}: not an npsco policy checkpoint (no 'npsco' metadata of format {FORMAT!r})")
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    if missing:
        raise NpscoError(f"{p}: checkpoint metadata lacks {', '.join(missing)}")
    if meta["format_version"] not in FORMAT_VERSIONS or isinstance(meta["format_version"], bool):
        raise NpscoError(
            f"{p}: checkpoint format version {meta['format_version']} is not supported (this npsco reads "
            f"{' and '.join(map(str, FORMAT_VERSIONS))})"
        )
    if not isinstance(meta["env_id"], str) or not meta["env_id"]:
        raise NpscoError(f"{p}: checkpoint metadata env_id must be a task id (a string), got {meta['env_id']!r}")
    meta["env_id"] = CheckpointTaskId(meta["env_id"])
    config = meta.get("config")
    if config is not None and not isinstance(config, dict):
        raise NpscoError(f"{p}: checkpoint metadata config must be an object, got {type(config).__name__}")
    if config and config.get("max_episode_steps") is not None:
        try:
            check_at_most("config.max_episode_steps", config["max_episode_steps"], MAX_EPISODE_STEPS, least=1)
        except NpscoError as e:
            raise NpscoError(f"{p}: checkpoint metadata {e}") from None
    return _policy_from_tensors(p, tensors, meta)


def _policy_from_tensors(p: Path, tensors: dict[str, np.ndarray], meta: dict[str, Any]) -> Policy:
    try:
        layers = meta["architecture"]["actor_hidden"]
        if len(layers) > len(tensors):  # each layer has its tensors: refused before anything is built from the list
            raise ValueError(f"{len(layers):,} hidden layers, but the file holds {len(tensors)} tensors")
        hidden = [int(h) for h in layers]
        obs_dim = int(np.prod(meta["observation_space"]["shape"]))
        act_dim = int(np.prod(meta["action_space"]["shape"]))
        if min([obs_dim, act_dim, *hidden]) < 1:
            raise ValueError("a layer of fewer than one unit")
        norm = meta["obs_norm"]
        obs_clip, norm_obs = float(norm["clip"]), bool(norm["enabled"])
        arch = meta["architecture"]
        # version 1 knows one architecture; version 2 names it (docs/checkpoints.md)
        kind = (
            ("tanh", "linear", "state-independent")
            if meta["format_version"] == 1
            else (arch["activation"], arch["output"], arch["log_std"])
        )
    except (KeyError, TypeError, ValueError) as e:
        raise NpscoError(f"{p}: malformed checkpoint metadata ({type(e).__name__}: {e})") from None
    activation, output, log_std = kind
    if activation not in ACTIVATIONS or output not in OUTPUTS or log_std not in LOG_STDS:
        raise NpscoError(
            f"{p}: unknown architecture (activation {activation!r}, output {output!r}, log_std "
            f"{log_std!r}; this npsco knows {ACTIVATIONS}, {OUTPUTS}, {LOG_STDS})"
        )
    sizes = [obs_dim, *hidden, act_dim]
    expected: dict[str, tuple[int, ...]] = {
        f"actor.{i}.weight": (sizes[i + 1], sizes[i]) for i in range(len(sizes) - 1)
    }
    expected.update({f"actor.{i}.bias": (sizes[i + 1],) for i in range(len(sizes) - 1)})
    expected.update(
        {"obs_norm.mean": (obs_dim,), "obs_norm.var": (obs_dim,), "action.low": (act_dim,), "action.high": (act_dim,)}
    )
    if log_std == "state-independent":
        expected["actor.log_std"] = (act_dim,)
    if set(tensors) != set(expected):
        extra, lacking = sorted(set(tensors) - set(expected)), sorted(set(expected) - set(tensors))
        raise NpscoError(
            f"{p}: tensors do not match the architecture (missing {lacking or 'none'}, unexpected {extra or 'none'})"
        )
    for name, shape in expected.items():
        t = tensors[name]
        if t.shape != shape:
            raise NpscoError(f"{p}: tensor {name} has shape {t.shape}, expected {shape}")
        if t.dtype != np.float32:
            raise NpscoError(f"{p}: tensor {name} has dtype {t.dtype}, expected float32")
        if not np.all(np.isfinite(t)):
            raise NpscoError(f"{p}: tensor {name} contains NaN or inf")
    if np.any(tensors["obs_norm.var"] < 0) or np.any(tensors["action.low"] > tensors["action.high"]):
        raise NpscoError(f"{p}: negative observation variance or inverted action bounds")
    n = len(sizes) - 1
    return Policy(
        weights=[(tensors[f"actor.{i}.weight"], tensors[f"actor.{i}.bias"]) for i in range(n)],
        log_std=tensors.get("actor.log_std", np.full(act_dim, -np.inf, np.float32)),
        obs_mean=tensors["obs_norm.mean"],
        obs_var=tensors["obs_norm.var"],
        obs_clip=obs_clip,
        norm_obs=norm_obs,
        action_low=tensors["action.low"],
        action_high=tensors["action.high"],
        metadata=meta,
        activation=activation,
        output=output,
    )


def space_metadata(space: gym.spaces.Box) -> dict[str, Any]:
    """JSON description of a Box space (shape and bounds; infinite bounds written as null)."""

    def bound(a: np.ndarray) -> list:
        return [None if not np.isfinite(x) else float(x) for x in np.asarray(a, np.float64).reshape(-1)]

    return {"type": "Box", "shape": list(space.shape), "low": bound(space.low), "high": bound(space.high)}
