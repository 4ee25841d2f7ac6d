"""Fingerprint of training: on fixed seeds, the bytes of the saved checkpoints and every per-iteration metric are the
ones recorded below. A refactoring that is meant to change nothing must leave this test passing, unchanged.

The runs (tiny budgets, ~20 s in all): PPO on the Four Reward Maze (3 iterations, with an evaluation), then IPD, WSR,
TNB, CTNB and CPO on the maze against that PPO policy (2 iterations each, with knobs that reach the less common code
paths), PPO on Hopper-v5 (2 iterations) and IPD on Hopper-v5 against it (2 iterations).

What is hashed, per run:
- the checkpoint `policy.safetensors`: its tensors (names, dtypes, shapes, bytes) and its metadata, less the creation
  time and less the settings that are at their default (so that adding a setting does not count as a change of
  behaviour, and changing a default does);
- `metrics.jsonl`: every value of every iteration, less the wall-clock timings (`charts/SPS`, `*_seconds`).

When a change is *meant* to alter training, regenerate the constants and paste them over `EXPECTED`:

    .venv/bin/python tests/integration/test_fingerprint.py

The bits depend on the CPU (BLAS and torch kernels): the constants hold for the CPU named in `PLATFORM` (this
project's machines, CI included); on another the test is skipped with the command above in its reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from npsco.methods import METHODS
from npsco.methods.cpo import CPO
from npsco.methods.ipd import IPD
from npsco.methods.settings import MethodConfig
from npsco.methods.tnb import CTNB, TNB
from npsco.methods.wsr import WSR
from npsco.novelty.references import ReferenceSet
from npsco.ppo.config import PPOConfig, preset
from npsco.ppo.train import train
from npsco.tasks import MAZE_ID
from npsco.policy import load_policy

os.environ.setdefault("MUJOCO_GL", "egl")

PLATFORM = {"blas": "SkylakeX", "torch_cpu": "AVX512"}
"""The CPU the constants were recorded on: OpenBLAS's kernel family and torch's vector instruction set."""

EXPECTED: dict[str, dict[str, str]] = {
    "maze-ppo": {
        "checkpoint": "1c0667bf3eb3204b77a180f4e655e8683915da7f61c01d4baced9ef8197edf12",
        "metrics": "12eda15290c52b2daf6d99e00fddce5d8fad727ae1d01fab0b33c9350a252eed"
    },
    "maze-ipd": {
        "checkpoint": "5316582403acf9a7cbe44e0a74d7d73d4ac96242b6a7913099ebc1f15a1b3a9f",
        "metrics": "488147dc05f3e984b2419f3111e41ca14292aea14373c587161c0b5afd276a07"
    },
    "maze-wsr": {
        "checkpoint": "b7c3da06234e564d40e70f0e556d3dbe594379396f377c014a4ae0fd36b95566",
        "metrics": "6ba0c7034fb24cdfa05a2f8d16d2ec736fd1c01a890539d01223ec824fbd1c51"
    },
    "maze-tnb": {
        "checkpoint": "c452aff55afdda34e878e0d584c5888088a79af1a6a2db3f9e3aa18588d83b82",
        "metrics": "46f990883006aec65384237cf36b8c3fb7a4f1e0ac136955a86327c556314d14"
    },
    "maze-ctnb": {
        "checkpoint": "52f678a17a7679958d723c24dd259fe489536c117030cf3973c3795196b54f71",
        "metrics": "8994dce70dff7b91cc9e6189099d7feb519c886d564be55d1dc84bf30a70128d"
    },
    "maze-cpo": {
        "checkpoint": "2c00c0b8e4f7aa10f9f77567839d7edf72e7dc267465ca996f6d11376fd9e129",
        "metrics": "e2a355c09c0480b740267385fc853ab62fdefc1a98927f91e5b4098f6ed9b2c3"
    },
    "hopper-ppo": {
        "checkpoint": "4d620bde898a19651ef5264865b27c5f1502e08127f09a614b73d4047030688c",
        "metrics": "91586aaad58575b0b5ecf7fe7f2723ee793645b1b7de4c923e8eb468d998e0d4"
    },
    "hopper-ipd": {
        "checkpoint": "35a5db08876aaca3ad197f9adeafc13371e0c02c352eb232bf8964bb34d4c95e",
        "metrics": "8aa79ebd583e963c18b65620e41bc17f7eb28bb0fb3a813e558deae07924d7e3"
    }
}

MAZE_NOVEL = {  # method class, its settings: each reaches a path the defaults do not
    "ipd": (IPD, {"r0_warmup": 0.5}),
    "wsr": (WSR, {"metric": "wasserstein2", "wsr_shape": "exp"}),
    "tnb": (TNB, {"novelty_action": "sample"}),
    "ctnb": (CTNB, {"ctnb_slack": 0.05}),
    "cpo": (CPO, {}),
}
TIMINGS = ("charts/SPS",)
"""Wall-clock metrics, left out of the fingerprint (with every key ending in `_seconds`)."""


def platform() -> dict[str, str]:
    blas = [lib.get("architecture", "?") for lib in threadpool_info() if lib["user_api"] == "blas"]
    return {"blas": blas[0] if blas else "?", "torch_cpu": torch.backends.cpu.get_cpu_capability()}


def _method_defaults() -> dict[str, Any]:
    """The default of every method's every setting, as one flat object (the method: ipd)."""
    out: dict[str, Any] = {}
    for name in METHODS:
        out.update(MethodConfig.of(name).to_dict())
    return {**out, "method": "ipd"}


def _settings_off_default(settings: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`settings` (a config dataclass as a dict, plus other entries) without the fields at their `defaults`."""
    return {k: v for k, v in settings.items()
            if k not in defaults or json.dumps(v) != json.dumps(list(defaults[k]) if isinstance(defaults[k], tuple)
                                                                else defaults[k])}


def checkpoint_hash(path: Path) -> str:
    """sha256 of a checkpoint's tensors and metadata (see the module docstring)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = json.loads(header.pop("__metadata__")["npsco"])
    meta.pop("created")
    meta["config"] = _settings_off_default(meta["config"], dataclasses.asdict(PPOConfig()))
    if meta.get("method_config"):
        meta["method_config"] = _settings_off_default(meta["method_config"], _method_defaults())
    digest = hashlib.sha256(json.dumps([header, meta], sort_keys=True).encode())
    digest.update(raw[8 + n:])
    return digest.hexdigest()


def metrics_hash(path: Path) -> str:
    """sha256 of the per-iteration metrics, less the wall-clock timings."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    kept = [{k: v for k, v in row.items() if k not in TIMINGS and not k.endswith("_seconds")} for row in rows]
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def fingerprint(run_dir: Path) -> dict[str, str]:
    return {"checkpoint": checkpoint_hash(run_dir / "policy.safetensors"),
            "metrics": metrics_hash(run_dir / "metrics.jsonl")}


def run_all(tmp: Path) -> dict[str, dict[str, str]]:
    """Train every run of the fingerprint under `tmp`; returns {run: {"checkpoint": sha256, "metrics": sha256}}."""
    out: dict[str, dict[str, str]] = {}
    with threadpool_limits(1, user_api="blas"):  # as the `npsco` command runs (pytest loads numpy multi-threaded)
        maze = dataclasses.replace(preset(MAZE_ID), total_timesteps=3 * 1024, eval_every=3, eval_episodes=5)
        train(maze, run_dir=tmp / "maze-ppo", progress=False, tensorboard=False)
        out["maze-ppo"] = fingerprint(tmp / "maze-ppo")
        refs = ReferenceSet([load_policy(tmp / "maze-ppo" / "policy.safetensors")], ["ppo"])
        for name, (cls, settings) in MAZE_NOVEL.items():
            method = cls(refs, 0.3, MethodConfig.of(name, **settings), MAZE_ID)
            cfg = dataclasses.replace(maze, seed=1, total_timesteps=2 * 1024, eval_every=0)
            train(cfg, method, run_dir=tmp / f"maze-{name}", progress=False, tensorboard=False)
            out[f"maze-{name}"] = fingerprint(tmp / f"maze-{name}")

        hopper = dataclasses.replace(preset("Hopper-v5"), total_timesteps=2 * 1024, num_steps=1024,
                                     num_minibatches=16, eval_every=2, eval_episodes=2)
        train(hopper, run_dir=tmp / "hopper-ppo", progress=False, tensorboard=False)
        out["hopper-ppo"] = fingerprint(tmp / "hopper-ppo")
        refs = ReferenceSet([load_policy(tmp / "hopper-ppo" / "policy.safetensors")], ["ppo"])
        method = IPD(refs, 0.6, MethodConfig.of("ipd"), "Hopper-v5")
        train(dataclasses.replace(hopper, seed=1), method, run_dir=tmp / "hopper-ipd", progress=False,
              tensorboard=False)
        out["hopper-ipd"] = fingerprint(tmp / "hopper-ipd")
    return out


def test_training_fingerprint_is_unchanged(tmp_path):
    if platform() != PLATFORM:
        pytest.skip(f"constants recorded on {PLATFORM}, this CPU is {platform()}: regenerate them with "
                    "`python tests/integration/test_fingerprint.py`")
    got = run_all(tmp_path)
    changed = sorted(run for run in EXPECTED if got.get(run) != EXPECTED[run])
    assert not changed and got.keys() == EXPECTED.keys(), (
        f"training changed in {', '.join(changed) or 'the set of runs'} (numpy {np.__version__}, torch "
        f"{torch.__version__}); if that is intended, regenerate the constants: python tests/integration/test_fingerprint.py")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        print("PLATFORM =", platform())
        print("EXPECTED = " + json.dumps(run_all(Path(d)), indent=4))
