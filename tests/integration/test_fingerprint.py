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

When a change is *meant* to alter training, regenerate the constants on each CPU of `EXPECTED_BY_PLATFORM` and paste
them over its entry (the command prints the CPU's key and its constants):

    .venv/bin/python tests/integration/test_fingerprint.py

The bits depend on the CPU (its vendor, BLAS and torch kernels): the project's machines, CI included, are Intel or
AMD processors with AVX-512, and each has its constants; on another CPU the test is skipped with the command above in
its reason.
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

EXPECTED_BY_PLATFORM: dict[str, dict[str, dict[str, str]]] = {
    "AuthenticAMD/SkylakeX/AVX512": {
        "maze-ppo": {
            "checkpoint": "5fd736db31ad0ce4ab3c115a2073bca69e14221f64af31a70d295b7678471763",
            "metrics": "55edf05902c935de637b33b68457650094f588c841fc3d38f6f97dd4933a9956"
        },
        "maze-ipd": {
            "checkpoint": "fb2a89640669e9a2d77f9b84395d86c9b8c3303da9370eebbdd05f01f93dd42c",
            "metrics": "8bfe476b4ee9b7539a4199e65628ffd96c8fa0b1e2eacdcda4839a7a0aa605c8"
        },
        "maze-wsr": {
            "checkpoint": "75a83ebfa9cc813e278cde1db543ed20ccb9a873d931b3ad1f9f7bdea7ae7be1",
            "metrics": "8890d72a67f08017ab6173106d8917520ca20b1639c02e483ea8ad097a98d82d"
        },
        "maze-tnb": {
            "checkpoint": "4283a16d7242119061596275145a232001ce624cfa442d66353f8aacdbc184ff",
            "metrics": "4814d2700ed4166eedbc7dc8511a5479e0c1482214f6be66cebff6548718d0af"
        },
        "maze-ctnb": {
            "checkpoint": "35634dde60449c890811c0f5043d379e75633c06ad54cfe2ba408368cd933de9",
            "metrics": "7c7b72e0ae6ef723c15dbd7e240b0d1700dbebd30d6e0ffd779627bd8b9b260f"
        },
        "maze-cpo": {
            "checkpoint": "4d810d34a677785247a8d7690a3bc9e9ba4b681346de3226d412fc90bf291189",
            "metrics": "a0424b9110622d9f62196d235a501eaf3a95f6b3204e0e4266f534add056d861"
        },
        "hopper-ppo": {
            "checkpoint": "f0eb6c8edd150c1e262ddfaa537c1407ec9c5a52ad3a12f2f83f5b37d3ec0a51",
            "metrics": "afda0262a10fbe16c58b29d14b0f7d01697728b9f45bf3bf956e63a2c7f31a7f"
        },
        "hopper-ipd": {
            "checkpoint": "77f3c96d1ff5b99fb34d8737887a1041743ecba3152b1eb9ebc26718b30e234a",
            "metrics": "633434b23f48a897cbe4304e4d1141b4fa5c6259ea1ea21cc161f648cec6fcb9"
        }
    }
}
"""The constants per CPU (`platform_key()`: the CPU's vendor, OpenBLAS's kernel family, torch's vector instruction
set): torch's CPU kernels round differently on Intel and AMD processors with the same instruction set."""

STALE: dict[str, str] = {
    "GenuineIntel/SkylakeX/AVX512": "the rollout's actions computed by the compiled forward pass (npsco.forward), "
    "and an evaluation after every iteration of a run of fewer than 10",
}
"""CPUs whose constants predate a change meant to alter training, with the change: their constants were dropped, and
the test is skipped there until they are regenerated on such a CPU (none was at hand when the change was made)."""


MAZE_NOVEL = {  # method class, its settings: each reaches a path the defaults do not
    "ipd": (IPD, {"r0_warmup": 0.5}),
    "wsr": (WSR, {"metric": "wasserstein2", "wsr_shape": "exp"}),
    "tnb": (TNB, {"novelty_action": "sample"}),
    "ctnb": (CTNB, {"ctnb_slack": 0.05}),
    "cpo": (CPO, {}),
}
TIMINGS = ("charts/SPS",)
"""Wall-clock metrics, left out of the fingerprint (with every key ending in `_seconds`)."""


def cpu_vendor() -> str:
    """The CPU's vendor id (`GenuineIntel`, `AuthenticAMD`; `?` where /proc/cpuinfo does not say)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def platform_key() -> str:
    """The CPU the bits depend on: vendor / OpenBLAS kernel family / torch's vector instruction set."""
    blas = [lib.get("architecture", "?") for lib in threadpool_info() if lib["user_api"] == "blas"]
    return f"{cpu_vendor()}/{blas[0] if blas else '?'}/{torch.backends.cpu.get_cpu_capability()}"


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
    key = platform_key()
    if key in STALE:
        pytest.skip(f"the constants of {key} were recorded before {STALE[key]}: regenerate them on this CPU with "
                    "`python tests/integration/test_fingerprint.py`, paste them in EXPECTED_BY_PLATFORM and drop the "
                    "CPU from STALE")
    if key not in EXPECTED_BY_PLATFORM:
        pytest.skip(f"constants recorded on {', '.join(EXPECTED_BY_PLATFORM)}, this CPU is {key}: add its own with "
                    "`python tests/integration/test_fingerprint.py`")
    EXPECTED = EXPECTED_BY_PLATFORM[key]
    got = run_all(tmp_path)
    changed = sorted(run for run in EXPECTED if got.get(run) != EXPECTED[run])
    assert not changed and got.keys() == EXPECTED.keys(), (
        f"training changed in {', '.join(changed) or 'the set of runs'} (numpy {np.__version__}, torch "
        f"{torch.__version__}); if that is intended, regenerate the constants: python tests/integration/test_fingerprint.py")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        print(f"{platform_key()!r}: " + json.dumps(run_all(Path(d)), indent=4))
