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
    "GenuineIntel/SkylakeX/AVX512": {
        "maze-ppo": {
            "checkpoint": "08f8febb4d5f095f95baea5d293146ad88ceff4c5bcc0be7f112dceeab893b36",
            "metrics": "542fb6d8a9eb195ddd633d8ea77b905ce88539558f17349f40cff084c2ae5445"
        },
        "maze-ipd": {
            "checkpoint": "6e8a559f37700acf3a854294055ce30f0abf6508df2a157c19f64a300316dd38",
            "metrics": "98f07693562ccde184c95d3f679b7efdfcb43519444d6dcaf6f6ffb0b6c95989"
        },
        "maze-wsr": {
            "checkpoint": "49d93396381b73095f2b52afcfa938a554f57c88fdad8f92e87fd9ba5c7be067",
            "metrics": "fcaf2137c314a9972ba45b8fced954cfe6cb20f30982bfc85413310bd0e8791b"
        },
        "maze-tnb": {
            "checkpoint": "d402d54262052ab8e12828313bfe543cfec93911b22034317f9eea57538a4c05",
            "metrics": "83e43c03ff2c4d748fddfecf70154615339171fd8c619e926f4978dff6cc60ae"
        },
        "maze-ctnb": {
            "checkpoint": "4b459b929ca0850cc8510e89cfcc43dc8336a4856b71bf4c23c2b4c6a49c1153",
            "metrics": "8f4ac54234cff6bb49ec025edcdae77a40d73a291fcf1203dacccb0a12146f9f"
        },
        "maze-cpo": {
            "checkpoint": "65cd5d4163b1767983955ef8fa734e6fad702e9400d079a8401806ed51b87c15",
            "metrics": "3cf8a12d83d06f45018cc18b607685052264989a0150605445155ecf29986db6"
        },
        "hopper-ppo": {
            "checkpoint": "75a0a0f465694f57ba92492b7ae5667ce79f5f97d4d2cda7d8e83485f575991c",
            "metrics": "159c6d8f21e40fd3794ba96780669c040143cd879094eb07bf10a70b46bfc74d"
        },
        "hopper-ipd": {
            "checkpoint": "67a13a55a6e9fa58cc85f69a6bd7aac9e5d2fa95c6d9c6a9e36fcaf692dc583c",
            "metrics": "d80f1b7dac8bde1e63f22c0b067a3c399b95ec77dfadefb893c4cd684a6ce730"
        }
    },
    "AuthenticAMD/SkylakeX/AVX512": {
        "maze-ppo": {
            "checkpoint": "4bbbde27e5c573d456dc223f8cfd95ed518550b490338c320fcbcf80bd503ff3",
            "metrics": "584457bacc9d7fff3fb5f5dd32b57a7d41b6eccd2048a267a07be2fd473deeed"
        },
        "maze-ipd": {
            "checkpoint": "69c38e4266afdac8a795a3b4180237d189bb15ea6e380b9bc3b3b14f3c9e0dac",
            "metrics": "bbef0bbaafccf9d7bcb3fcf16772f883592872d355456d27202c3029cb2eb555"
        },
        "maze-wsr": {
            "checkpoint": "479c0535fcafcf62a7808d17a42bd2cba3590f888333272a6680bd0351720bcc",
            "metrics": "cbba532071b73d012d49461749fdaf8347ef521efb480b591241d3b317826c91"
        },
        "maze-tnb": {
            "checkpoint": "c2de321706321da257d59511d96ab5cba12066ff65f70466f157f39c73a9198b",
            "metrics": "46f867e34e76431b351d9ab15acb592d554d64ba572c685704e55a5f7081c140"
        },
        "maze-ctnb": {
            "checkpoint": "f18d82c19bc12507e067ec4af3aa06cccbe235854a1e340c755b462262544074",
            "metrics": "0d76e7add08951c50d89d19ad674f009ad4859cf05bb9fc175f3236154f1fa7f"
        },
        "maze-cpo": {
            "checkpoint": "7ac7ed2c152b010f89b577ab9ac64d57813288cf388a508dac0e22d2a4134bce",
            "metrics": "9063fda4955b1674b68fbf044d547fe6c99cc83d98e729389dc73e3819e0ea91"
        },
        "hopper-ppo": {
            "checkpoint": "3ec88412a7b66c95282349ca38f55e72d051e1d69c11ee65fa815e633d8cc00d",
            "metrics": "30bfda3ff69f419243b60147e42de97ebf2169e69a126e511ae7191e1f639dd8"
        },
        "hopper-ipd": {
            "checkpoint": "fbf1d2ff1d1346c07c394e2287c19f1f916ef994a20f5a6191efea5e6e7d033c",
            "metrics": "9a18a24cdaf582099154f4fcb010cca190d4485f3b0760521f481afa0d541df0"
        }
    }
}
"""The constants per CPU (`platform_key()`: the CPU's vendor, OpenBLAS's kernel family, torch's vector instruction
set): torch's CPU kernels round differently on Intel and AMD processors with the same instruction set."""


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
