"""`npsco import`: Stable-Baselines3 and CleanRL policies, built here on tiny budgets, become npsco checkpoints whose
deterministic actions equal the originals' (1,000 observations each), and serve as references; what is not
supported or not safe is refused with one line, and payloads in the files never run."""

import base64
import io
import json
import os
import pickle
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from npsco.cli import main
from npsco.errors import NpscoError
from npsco.importers.convert import import_policy
from npsco.policy import load_policy

sb3 = pytest.importorskip("stable_baselines3", reason="stable-baselines3 (the dev extra) builds the models to import")
from stable_baselines3 import A2C, PPO, SAC, TD3  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402

os.environ.setdefault("MUJOCO_GL", "egl")
torch.set_num_threads(1)


def observations(env_id: str, n: int = 1000, seed: int = 0) -> np.ndarray:
    """n raw observations of the task: states of random-action episodes, half of them pushed off the visited set."""
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    while len(out) < n:
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    out = np.array(out, np.float32)
    out[::2] += rng.normal(0, 2, size=out[::2].shape).astype(np.float32)
    return out


def perturbed(model, scale: float = 0.1, seed: int = 0):
    """The model with every policy weight moved by N(0, scale): SB3's tiny output-layer init would make any two
    policies agree to 1e-3 and hide mistakes."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.policy.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return model


@pytest.fixture(scope="module")
def hopper(tmp_path_factory):
    """An SB3 PPO Hopper-v5 model (default MlpPolicy) trained inside VecNormalize, saved with model.save()."""
    out = tmp_path_factory.mktemp("sb3")
    venv = VecNormalize(make_vec_env("Hopper-v5", n_envs=1, seed=0))
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(512)
    perturbed(model).save(out / "hopper_ppo.zip")
    venv.save(out / "vecnormalize.pkl")
    return out, model, venv


def test_sb3_ppo_hopper_with_vecnormalize_gives_the_same_actions(hopper, tmp_path, capsys):
    out, model, venv = hopper
    code = main(
        [
            "import",
            str(out / "hopper_ppo.zip"),
            "--vecnormalize",
            str(out / "vecnormalize.pkl"),
            "--env",
            "Hopper-v5",
            "--out",
            str(tmp_path / "imported"),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "stable-baselines3 PPO: MLP 64x64 tanh, clipped actions, with observation normalisation" in text
    policy = load_policy(tmp_path / "imported")
    assert policy.metadata["method"] == "sb3-ppo" and policy.metadata["format_version"] == 1  # npsco's own format
    assert policy.metadata["imported"]["library"] == "stable-baselines3"
    obs = observations("Hopper-v5")
    expected, _ = PPO.load(out / "hopper_ppo.zip", device="cpu").predict(venv.normalize_obs(obs), deterministic=True)
    assert np.abs(expected).max() > 0.5 and (np.abs(expected) == 1).any()  # real actions, some clipped
    assert np.abs(policy.mean_action(obs) - expected).max() < 1e-5


def test_the_python_example_of_docs_import_md_runs(hopper, tmp_path, monkeypatch, capsys):
    import re
    import shutil

    page = (Path(__file__).resolve().parents[2] / "docs" / "import.md").read_text()
    examples = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    assert len(examples) == 1
    for name in ("hopper_ppo.zip", "vecnormalize.pkl"):
        shutil.copy(hopper[0] / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(examples[0], "docs/import.md", "exec"), namespace)
    assert (
        namespace["policy"].metadata["method"] == "sb3-ppo"
        and "with observation normalisation" in capsys.readouterr().out
    )
    assert (tmp_path / "runs/imported/sb3-hopper/policy.safetensors").exists()


def test_an_imported_policy_is_a_reference_and_is_evaluated(hopper, hopper_tiny, tmp_path, capsys):
    out, _, _ = hopper
    ref = tmp_path / "sb3-hopper"
    import_policy(out / "hopper_ppo.zip", "Hopper-v5", ref, vecnormalize=out / "vecnormalize.pkl")
    assert main(["evaluate", str(ref), "--episodes", "2"]) == 0
    assert json.loads((ref / "policy.eval.json").read_text())["episodes"] == 2
    run = tmp_path / "ipd"
    assert (
        main(
            [
                "population",
                *hopper_tiny,
                "--method",
                "ipd",
                "--ref-checkpoints",
                str(ref),
                "--novel",
                "1",
                "--r0",
                "0.5",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    manifest = json.loads((run / "manifest.json").read_text())
    ref0, k0 = manifest["members"]
    assert ref0["method"] == "sb3-ppo" and ref0["status"] == "done" and Path(ref0["path"]) == ref.resolve()
    assert k0["status"] == "done" and k0["references"] == ["ref0"]
    capsys.readouterr()


@pytest.mark.parametrize("algo", ["a2c", "sac", "td3"])
def test_sb3_a2c_sac_td3_give_the_same_actions(tmp_path, algo):
    if algo == "a2c":  # ReLU, separate policy and value branches of other sizes
        model = A2C(
            "MlpPolicy",
            "Pendulum-v1",
            n_steps=8,
            seed=0,
            device="cpu",
            policy_kwargs=dict(activation_fn=nn.ReLU, net_arch=dict(pi=[32, 16], vf=[8])),
        )
    elif algo == "sac":
        model = SAC(
            "MlpPolicy",
            "Pendulum-v1",
            learning_starts=16,
            batch_size=16,
            seed=0,
            device="cpu",
            policy_kwargs=dict(net_arch=[32, 32]),
        )
    else:
        model = TD3(
            "MlpPolicy",
            "Pendulum-v1",
            learning_starts=16,
            batch_size=16,
            seed=0,
            device="cpu",
            policy_kwargs=dict(net_arch=[24, 12], activation_fn=nn.Tanh),
        )
    model.learn(32)
    perturbed(model).save(tmp_path / "model.zip")
    result = import_policy(tmp_path / "model.zip", "Pendulum-v1", tmp_path / "out")
    policy = load_policy(result.checkpoint)
    assert policy.metadata["method"] == f"sb3-{algo}" and policy.metadata["format_version"] == 2
    assert policy.deterministic_only == (algo != "a2c") and bool(result.lost) == (algo != "a2c")
    obs = observations("Pendulum-v1")
    expected, _ = type(model).load(tmp_path / "model.zip", device="cpu").predict(obs, deterministic=True)
    assert np.abs(expected).max() > 0.5
    assert np.abs(policy.mean_action(obs) - expected).max() < 1e-5


class CleanRLAgent(nn.Module):
    """The agent of CleanRL's ppo_continuous_action.py (same modules and names, hence the same state dict)."""

    def __init__(self, obs_dim: int, act_dim: int):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor_mean = nn.Sequential(
            nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, act_dim)
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))


def test_cleanrl_ppo_gives_the_same_actions_and_says_what_is_lost(tmp_path, capsys):
    torch.manual_seed(0)
    agent = CleanRLAgent(11, 3)
    with torch.no_grad():
        agent.actor_logstd.fill_(-0.7)
    path = tmp_path / "ppo_continuous_action.cleanrl_model"
    torch.save(agent.state_dict(), path)
    assert main(["import", str(path), "--env", "Hopper-v5", "--seed", "3", "--out", str(tmp_path / "a")]) == 0
    text = capsys.readouterr().out
    assert "cleanrl PPO" in text and "not imported: CleanRL's observation normaliser" in text
    policy = load_policy(tmp_path / "a")
    obs = observations("Hopper-v5")
    with torch.no_grad():
        expected = agent.actor_mean(torch.as_tensor(obs)).clamp(-1, 1).numpy()  # CleanRL's ClipAction
    assert np.abs(policy.mean_action(obs) - expected).max() < 1e-5
    assert policy.metadata["seed"] == 3 and np.allclose(policy.action_std, np.exp(-0.7))
    # with the statistics the user kept: the same normalisation as Gymnasium's NormalizeObservation
    mean, var = obs.mean(0), obs.var(0)
    np.savez(tmp_path / "stats.npz", mean=mean, var=var)
    assert (
        main(
            [
                "import",
                str(path),
                "--env",
                "Hopper-v5",
                "--obs-norm",
                str(tmp_path / "stats.npz"),
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 0
    )
    assert "not imported" not in capsys.readouterr().out
    normalised = np.clip((obs - mean) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32)
    with torch.no_grad():
        expected = agent.actor_mean(torch.as_tensor(normalised)).clamp(-1, 1).numpy()
    assert np.abs(load_policy(tmp_path / "b").mean_action(obs) - expected).max() < 1e-5


# ------------------------------------------------------------------------------------------------------- refusals
def rewrite_zip(src: Path, dst: Path, **entries: bytes) -> Path:
    """A copy of an SB3 zip with some entries replaced."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, entries.get(name.replace(".", "_"), zin.read(name)))
    return dst


@pytest.fixture(scope="module")
def pendulum_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pendulum") / "ppo.zip"
    PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu").save(out)
    return out


def refused(capsys, args: list[str], *fragments: str) -> str:
    assert main(["import", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err
    return err


class _Touch:
    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


def test_a_policy_file_carrying_a_pickle_payload_is_refused_without_running(pendulum_zip, tmp_path, capsys):
    marker = tmp_path / "pwned"
    payload = io.BytesIO()
    torch.save({"action_net.weight": _Touch(marker)}, payload)
    bad = rewrite_zip(pendulum_zip, tmp_path / "bad.zip", policy_pth=payload.getvalue())
    refused(
        capsys,
        [str(bad), "--env", "Pendulum-v1", "--out", str(tmp_path / "o")],
        "refused",
        "not a plain PyTorch state dict",
    )
    assert not marker.exists() and not (tmp_path / "o").exists()
    torch.load(io.BytesIO(payload.getvalue()), weights_only=False)  # the payload is live
    assert marker.exists()


def test_the_pickled_fields_of_data_are_never_decoded(pendulum_zip, tmp_path):
    marker = tmp_path / "pwned"
    with zipfile.ZipFile(pendulum_zip) as z:
        data = json.loads(z.read("data"))
    data["policy_kwargs"] = {
        ":type:": "<class 'dict'>",
        ":serialized:": base64.b64encode(pickle.dumps(_Touch(marker))).decode(),
    }
    data["lr_schedule"][":serialized:"] = data["policy_kwargs"][":serialized:"]
    zip_ = rewrite_zip(pendulum_zip, tmp_path / "model.zip", data=json.dumps(data).encode())
    import_policy(zip_, "Pendulum-v1", tmp_path / "out")
    assert (tmp_path / "out" / "policy.safetensors").exists() and not marker.exists()


def test_refuses_discrete_actions(tmp_path, capsys):
    PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, device="cpu").save(tmp_path / "cartpole.zip")
    refused(capsys, [str(tmp_path / "cartpole.zip"), "--env", "CartPole-v1"], "Discrete actions are not supported")


def test_a_zip_that_is_neither_an_sb3_model_nor_a_torch_file_is_said_so(tmp_path, capsys):
    with zipfile.ZipFile(tmp_path / "photos.zip", "w") as z:
        z.writestr("photo.txt", "not a model")
    err = refused(
        capsys,
        [str(tmp_path / "photos.zip"), "--env", "Pendulum-v1"],
        "a zip archive of photo.txt: neither an SB3 model (data, policy.pth) nor a torch.save file (data.pkl)",
    )
    assert "enforce fail" not in err


def test_refuses_image_observations_and_cnn_extractors(pendulum_zip, tmp_path, capsys):
    with zipfile.ZipFile(pendulum_zip) as z:
        data, weights = json.loads(z.read("data")), z.read("policy.pth")
    image = dict(data, observation_space=dict(data["observation_space"], _shape=[84, 84, 3]))
    bad = rewrite_zip(pendulum_zip, tmp_path / "image.zip", data=json.dumps(image).encode())
    refused(capsys, [str(bad), "--env", "Pendulum-v1"], "image observations are not supported")
    state = torch.load(io.BytesIO(weights), weights_only=True)
    state["features_extractor.cnn.0.weight"] = torch.zeros(32, 3, 8, 8)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    bad = rewrite_zip(pendulum_zip, tmp_path / "cnn.zip", policy_pth=buffer.getvalue())
    refused(capsys, [str(bad), "--env", "Pendulum-v1"], "a CNN on image observations")


def test_refuses_unknown_architectures_and_activations(pendulum_zip, tmp_path, capsys):
    buffer = io.BytesIO()
    torch.save({"encoder.weight": torch.zeros(4, 3)}, buffer)
    bad = rewrite_zip(pendulum_zip, tmp_path / "arch.zip", policy_pth=buffer.getvalue())
    refused(capsys, [str(bad), "--env", "Pendulum-v1"], "unknown policy architecture")
    with zipfile.ZipFile(pendulum_zip) as z:
        data = json.loads(z.read("data"))
    data["policy_kwargs"] = {
        ":type:": "<class 'dict'>",
        ":serialized:": "",
        "activation_fn": "<class 'torch.nn.modules.activation.ELU'>",
    }
    bad = rewrite_zip(pendulum_zip, tmp_path / "elu.zip", data=json.dumps(data).encode())
    refused(capsys, [str(bad), "--env", "Pendulum-v1"], "activation ELU is not supported")
    buffer = io.BytesIO()  # SAC with gSDE wraps mu in Hardtanh: a clipped mean npsco cannot express
    torch.save(
        {
            "actor.latent_pi.0.weight": torch.zeros(8, 3),
            "actor.latent_pi.0.bias": torch.zeros(8),
            "actor.mu.0.weight": torch.zeros(1, 8),
            "actor.mu.0.bias": torch.zeros(1),
        },
        buffer,
    )
    bad = rewrite_zip(pendulum_zip, tmp_path / "sde.zip", policy_pth=buffer.getvalue())
    refused(capsys, [str(bad), "--env", "Pendulum-v1"], "SAC with gSDE clips its mean")
    torch.save({"conv.weight": torch.zeros(2, 2, 3, 3)}, tmp_path / "x.cleanrl_model")
    refused(capsys, [str(tmp_path / "x.cleanrl_model"), "--env", "Pendulum-v1"], "convolutional agent")


def test_refuses_the_wrong_task_and_mismatched_statistics(pendulum_zip, hopper, tmp_path, capsys):
    refused(
        capsys,
        [str(pendulum_zip), "--env", "Hopper-v5"],
        "maps 3 observations to 1 actions",
        "Hopper-v5 has 11 observations and 3 actions",
    )
    refused(
        capsys,
        [str(pendulum_zip), "--env", "Pendulum-v1", "--vecnormalize", str(hopper[0] / "vecnormalize.pkl")],
        "statistics have shape (11,)",
    )
    refused(capsys, [str(tmp_path / "none.zip"), "--env", "Pendulum-v1"], "no such file")
    refused(capsys, [str(pendulum_zip), "--env", "NoSuchTask-v0"], "unknown environment id")
    with pytest.raises(NpscoError, match="--obs-norm is for CleanRL"):
        import_policy(pendulum_zip, "Pendulum-v1", tmp_path / "o", obs_norm=tmp_path / "s.npz")


def test_an_import_never_overwrites_a_policy_or_a_run_without_a_word(pendulum_zip, tmp_path, capsys):
    out = tmp_path / "pend"
    assert main(["import", str(pendulum_zip), "--env", "Pendulum-v1", "--out", str(out)]) == 0
    before = (out / "policy.safetensors").read_bytes()
    capsys.readouterr()
    refused(capsys, [str(pendulum_zip), "--env", "Pendulum-v1", "--out", str(out)], "already holds a policy", "--force")
    assert (out / "policy.safetensors").read_bytes() == before
    # --force replaces an earlier import's policy (a temporary file that a killed import left is no obstacle)
    (out / ".policy.safetensors.abcd1234.tmp").write_bytes(b"cut short")
    assert main(["import", str(pendulum_zip), "--env", "Pendulum-v1", "--out", str(out), "--force"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.name != ".npsco.lock") == ["policy.safetensors"]
    assert load_policy(out / "policy.safetensors").metadata["env_id"] == "Pendulum-v1"
    # a trained run is never replaced, --force or not; nor a folder holding something else
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"command": "train"}')
    (run / "policy.safetensors").write_bytes(b"trained")
    for extra in ([], ["--force"]):
        refused(capsys, [str(pendulum_zip), "--env", "Pendulum-v1", "--out", str(run), *extra], "holds an npsco run")
    assert (run / "policy.safetensors").read_bytes() == b"trained"
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused(capsys, [str(pendulum_zip), "--env", "Pendulum-v1", "--out", str(other), "--force"], "is not empty")
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_an_import_into_a_folder_with_a_link_below_it_is_refused_before_it_writes(pendulum_zip, tmp_path, capsys):
    out = tmp_path / "pend"
    assert main(["import", str(pendulum_zip), "--env", "Pendulum-v1", "--out", str(out)]) == 0
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", out / "extra")  # an earlier import's folder, with a link placed below it
    before = (out / "policy.safetensors").read_bytes()
    capsys.readouterr()
    refused(capsys, [str(pendulum_zip), "--env", "Pendulum-v1", "--out", str(out), "--force"], "symbolic link")
    assert (out / "policy.safetensors").read_bytes() == before and not list((tmp_path / "outside").iterdir())
