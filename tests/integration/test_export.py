"""`npsco export --onnx`: the ONNX model's action equals `Policy.mean_action` (to float32 rounding) for a trained
policy, an imported-style squashed ReLU policy and one without observation normalisation, and the command writes it."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime
import pytest

from npsco.cli import main
from npsco.errors import NpscoError
from npsco.export import export_onnx
from npsco.policy import load_policy
from npsco.ppo.config import preset
from npsco.ppo.train import train
from npsco.tasks import MAZE_ID


def onnx_actions(path, obs: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["action"], {"obs": obs.astype(np.float32)})[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run = tmp_path_factory.mktemp("export") / "run"
    cfg = dataclasses.replace(preset(MAZE_ID), total_timesteps=1024, eval_every=0)
    train(cfg, run_dir=run, progress=False, tensorboard=False)
    return run


def test_the_command_writes_a_model_whose_actions_are_the_policys(trained, tmp_path, capsys):
    out = tmp_path / "policy.onnx"
    assert main(["export", str(trained), "--onnx", "--out", str(out)]) == 0
    assert "written:" in capsys.readouterr().out
    policy = load_policy(trained)
    obs = np.random.default_rng(0).uniform(-2.0, 18.0, (64, policy.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(onnx_actions(out, obs), policy.mean_action(obs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["squashed_relu", "no_normalisation", "clipped"])
def test_other_architectures_export_exactly_too(variant, trained, tmp_path, maze_policies):
    policy = load_policy(trained)
    if variant == "squashed_relu":
        rng = np.random.default_rng(1)
        weights = [
            (rng.normal(0, 0.5, (16, 2)).astype(np.float32), rng.normal(0, 0.1, 16).astype(np.float32)),
            (rng.normal(0, 0.5, (2, 16)).astype(np.float32), rng.normal(0, 0.1, 2).astype(np.float32)),
        ]
        policy = dataclasses.replace(policy, weights=weights, activation="relu", output="tanh")
    elif variant == "no_normalisation":
        policy = dataclasses.replace(policy, norm_obs=False)
    else:  # a large last layer: most actions beyond the bounds, clipped
        (w, b) = policy.weights[-1]
        policy = dataclasses.replace(policy, weights=[*policy.weights[:-1], (w * 200, b)])
    path = export_onnx(policy, tmp_path / "p.onnx")
    obs = np.random.default_rng(2).uniform(0.0, 16.0, (128, 2)).astype(np.float32)
    np.testing.assert_allclose(onnx_actions(path, obs), policy.mean_action(obs), rtol=1e-5, atol=1e-6)
    if variant == "clipped":
        assert np.mean(np.abs(policy.mean_action(obs)) == 1.0) > 0.3


def test_without_onnx_installed_the_message_says_what_to_install(trained, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_onnx(name, *args, **kwargs):
        if name == "onnx":
            raise ImportError("no onnx")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    with pytest.raises(NpscoError, match=r"pip install 'npsco\[onnx\]'"):
        export_onnx(load_policy(trained), "x.onnx")
