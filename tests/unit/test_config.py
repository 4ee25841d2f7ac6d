"""Tests of PPO's settings (npsco.ppo.config): presets per task, validation, `--set key=value` overrides
(npsco.fields) and the per-field docstrings."""

import dataclasses

import pytest

from npsco.errors import NpscoError
from npsco.fields import apply_overrides, field_docs
from npsco.ppo.config import PPOConfig, preset
from npsco.tasks import MAZE_ID, task_family

MUJOCO = ["Hopper", "Walker2d", "HalfCheetah"]


# ----------------------------------------------------------------------------------------------------------- presets
@pytest.mark.parametrize("name", ["default", "paper"])
def test_maze_preset(name):
    cfg = preset(MAZE_ID, name)
    assert cfg.env_id == MAZE_ID
    assert (cfg.total_timesteps, cfg.num_envs, cfg.num_steps, cfg.num_minibatches) == (150_000, 16, 64, 4)
    assert (cfg.learning_rate, cfg.update_epochs, cfg.eval_every, cfg.eval_episodes) == (1e-3, 10, 10, 50)
    assert (cfg.batch_size, cfg.minibatch_size, cfg.num_iterations) == (1024, 256, 146)
    assert cfg.checkpoint_every == 0


@pytest.mark.parametrize("version", ["v5", "v4"])
@pytest.mark.parametrize("task", MUJOCO)
def test_mujoco_default_preset_is_cleanrl_like(task, version):
    cfg = preset(f"{task}-{version}")
    assert cfg.env_id == f"{task}-{version}"
    assert cfg == dataclasses.replace(PPOConfig(), env_id=f"{task}-{version}")
    assert (cfg.actor_hidden, cfg.critic_hidden, cfg.total_timesteps) == ((64, 64), (64, 64), 1_000_000)
    assert (cfg.num_envs, cfg.num_steps, cfg.minibatch_size, cfg.update_epochs) == (1, 2048, 64, 10)
    assert (cfg.gamma, cfg.gae_lambda, cfg.learning_rate) == (0.99, 0.95, 3e-4)


@pytest.mark.parametrize(
    ("task", "hidden", "steps"),
    [("Hopper", (32, 10), 1_000_000), ("Walker2d", (32, 64), 1_600_000), ("HalfCheetah", (32, 256), 3_000_000)],
)
def test_mujoco_paper_preset_follows_appendix_c(task, hidden, steps):
    cfg = preset(f"{task}-v5", "paper")
    assert cfg.actor_hidden == hidden
    assert cfg.total_timesteps == steps
    assert (cfg.gamma, cfg.gae_lambda) == (0.995, 0.97)
    assert cfg.critic_hidden == (64, 64)
    cfg.validate()


def test_unknown_env_gets_the_plain_defaults_and_unknown_preset_is_refused():
    assert preset("Ant-v5", "paper") == dataclasses.replace(PPOConfig(), env_id="Ant-v5")
    with pytest.raises(NpscoError, match="unknown preset 'fast'; choose one of default, paper"):
        preset(MAZE_ID, "fast")


@pytest.mark.parametrize(
    ("env_id", "family"),
    [
        (MAZE_ID, "maze"),
        ("Hopper-v5", "Hopper"),
        ("Walker2d-v4", "Walker2d"),
        ("HalfCheetah-v5", "HalfCheetah"),
        ("Ant-v5", "other"),
        ("npsco/Other-v0", "other"),
    ],
)
def test_task_family(env_id, family):
    assert task_family(env_id) == family


# -------------------------------------------------------------------------------------------------------- validate
def test_every_preset_validates():
    for env_id in [MAZE_ID] + [f"{t}-v5" for t in MUJOCO]:
        for name in ("default", "paper"):
            assert preset(env_id, name).validate() is not None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"total_timesteps": 0}, "total_timesteps must be > 0"),
        ({"num_envs": 0}, "num_envs and num_steps must be > 0"),
        ({"num_steps": -1}, "num_envs and num_steps must be > 0"),
        ({"num_minibatches": 3}, "num_minibatches (3) must divide the batch size num_envs*num_steps (2048)"),
        ({"num_minibatches": 0}, "num_minibatches (0) must divide"),
        ({"update_epochs": 0}, "update_epochs must be > 0"),
        ({"gamma": 0.0}, "gamma must be in (0, 1]"),
        ({"gamma": 1.01}, "gamma must be in (0, 1]"),
        ({"gae_lambda": -0.1}, "gae_lambda in [0, 1]"),
        ({"learning_rate": 0.0}, "learning_rate must be > 0"),
        ({"clip_coef": 0.0}, "clip_coef must be > 0"),
        ({"env_backend": "threads"}, "env_backend must be auto, sync, async or envpool, not 'threads'"),
        ({"eval_episodes": 0}, "eval_episodes must be > 0"),
        ({"torch_threads": 0}, "torch_threads must be > 0"),
        ({"max_episode_steps": 0}, "max_episode_steps must be > 0"),
    ],
)
def test_validate_refuses_inconsistent_settings(change, message):
    with pytest.raises(NpscoError) as info:
        dataclasses.replace(PPOConfig(), **change).validate()
    assert str(info.value).startswith("invalid configuration: ")
    assert message in str(info.value)


def test_validate_accepts_edge_values_and_returns_self():
    cfg = dataclasses.replace(PPOConfig(), gamma=1.0, gae_lambda=0.0, max_episode_steps=1, num_minibatches=2048)
    assert cfg.validate() is cfg


def test_num_iterations_rounds_the_budget_down_to_whole_batches():
    assert dataclasses.replace(PPOConfig(), total_timesteps=2048).num_iterations == 1
    assert dataclasses.replace(PPOConfig(), total_timesteps=4096 + 100).num_iterations == 2


def test_a_budget_smaller_than_one_batch_is_refused_not_trained_as_a_full_batch(capsys):
    from npsco.cli import main

    with pytest.raises(
        NpscoError, match=r"total_timesteps \(10\) is less than one batch, num_envs\*num_steps \(2048\)"
    ):
        dataclasses.replace(PPOConfig(), total_timesteps=10).validate()
    assert main(["train", "--env", "Hopper-v5", "--steps", "1000", "--out", "unused"]) == 2
    assert "is less than one batch" in capsys.readouterr().err


def test_to_dict_is_json_ready_and_from_dict_inverts_it():
    import json

    cfg = preset("Hopper-v5", "paper")
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["actor_hidden"] == [32, 10]
    assert PPOConfig.from_dict(data) == cfg
    with pytest.raises(NpscoError, match="unknown PPO config field.*: bogus"):
        PPOConfig.from_dict({**data, "bogus": 1})


# --------------------------------------------------------------------------------------------------- apply_overrides
@pytest.mark.parametrize(
    ("assignment", "field", "value"),
    [
        ("learning_rate=1e-3", "learning_rate", 1e-3),
        ("gamma=1", "gamma", 1.0),
        ("total_timesteps=1e5", "total_timesteps", 100_000),
        ("total_timesteps=2048", "total_timesteps", 2048),
        ("num_envs= 8 ", "num_envs", 8),
        ("norm_obs=false", "norm_obs", False),
        ("norm_obs=0", "norm_obs", False),
        ("norm_obs=no", "norm_obs", False),
        ("anneal_lr=False", "anneal_lr", False),
        ("scale_reward=off", "scale_reward", False),
        ("clip_vloss=True", "clip_vloss", True),
        ("clip_vloss=1", "clip_vloss", True),
        ("clip_vloss=yes", "clip_vloss", True),
        ("clip_vloss=on", "clip_vloss", True),
        ("actor_hidden=32,10", "actor_hidden", (32, 10)),
        ("actor_hidden=(32, 256)", "actor_hidden", (32, 256)),
        ("critic_hidden=[128]", "critic_hidden", (128,)),
        ("critic_hidden=()", "critic_hidden", ()),
        ("target_kl=None", "target_kl", None),
        ("target_kl=none", "target_kl", None),
        ("target_kl=0.015", "target_kl", 0.015),
        ("max_episode_steps=None", "max_episode_steps", None),
        ("max_episode_steps=500", "max_episode_steps", 500),
        ("env_backend=async", "env_backend", "async"),
        ("env_id=Walker2d-v4", "env_id", "Walker2d-v4"),
        ("max-grad-norm=0.75", "max_grad_norm", 0.75),
    ],
)
def test_apply_overrides_converts_to_the_field_type(assignment, field, value):
    base = PPOConfig()
    cfg = apply_overrides(base, [assignment])
    got = getattr(cfg, field)
    assert got == value and type(got) is type(value)
    assert base == PPOConfig()  # the input is not modified
    others = {f.name for f in dataclasses.fields(cfg)} - {field}
    assert all(getattr(cfg, name) == getattr(base, name) for name in others)


def test_apply_overrides_applies_several_in_order():
    cfg = apply_overrides(preset(MAZE_ID), ["seed=3", "num_steps=32", "seed=4"])
    assert (cfg.seed, cfg.num_steps, cfg.num_envs) == (4, 32, 16)


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("num_envs=1.5", "bad value for num_envs: '1.5' (expected int)"),
        ("num_envs=many", "bad value for num_envs: 'many' (expected int)"),
        ("num_envs=None", "bad value for num_envs: 'None' (expected int)"),
        ("learning_rate=fast", "bad value for learning_rate: 'fast' (expected float)"),
        ("norm_obs=maybe", "bad value for norm_obs: 'maybe' (expected bool)"),
        ("actor_hidden=64,x", "bad value for actor_hidden: '64,x' (expected tuple[int, ...])"),
        ("target_kl=tiny", "bad value for target_kl: 'tiny' (expected float | None)"),
        ("max_episode_steps=1e2.5", "bad value for max_episode_steps"),
        ("learning_rate", "--set expects key=value, got 'learning_rate'"),
    ],
)
def test_apply_overrides_refuses_bad_values_clearly(assignment, message):
    with pytest.raises(NpscoError) as info:
        apply_overrides(PPOConfig(), [assignment])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_apply_overrides_refuses_unknown_keys_and_lists_the_known_ones():
    with pytest.raises(NpscoError) as info:
        apply_overrides(PPOConfig(), ["learning_rat=1e-3"])
    message = str(info.value)
    assert message.startswith("unknown setting 'learning_rat'; known: ")
    assert "learning_rate" in message and "num_envs" in message


# ------------------------------------------------------------------------------------------------------- field_docs
@dataclasses.dataclass
class _Partly:  # (module level: field_docs parses the class's source, which must not be indented)
    documented: int = 1
    """It is documented
    over two lines."""
    undocumented: int = 2


def test_every_config_field_has_a_docstring():
    docs = field_docs(PPOConfig)
    names = [f.name for f in dataclasses.fields(PPOConfig)]
    assert list(docs) == names  # every field, in order, nothing else
    for name in names:
        assert len(docs[name]) >= 10, f"PPOConfig.{name} has no real docstring: {docs[name]!r}"
        assert "\n" not in docs[name] and docs[name] == docs[name].strip()


def test_field_docs_reads_the_string_under_each_field():
    assert field_docs(PPOConfig)["gamma"] == "Discount factor."
    assert field_docs(PPOConfig)["num_envs"] == "Number of environments stepped in parallel (one vector env)."
    assert field_docs(_Partly) == {"documented": "It is documented over two lines."}


def test_default_threshold_multiple_is_the_methods_and_r0_scale_is_not_a_method_setting():
    from npsco.methods.registry import default_r0_scale
    from npsco.methods.settings import MethodConfig
    from npsco.population_config import PopulationConfig

    assert [default_r0_scale(m) for m in ("ipd", "wsr", "tnb", "ctnb", "cpo")] == [0.5] * 5
    assert PopulationConfig(ppo=preset("Hopper-v5"), method=MethodConfig()).validate().r0_scales == (0.5,)
    assert PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig()).validate().r0_scales == (0.5,)
    assert PopulationConfig(ppo=preset("Hopper-v5"), method=MethodConfig(r0=0.6)).validate().r0_scales == (1.0,)
    assert PopulationConfig(ppo=preset("Hopper-v5"), method=MethodConfig(), r0_scales=(2,)).validate().r0_scales == (
        2.0,
    )
    with pytest.raises(NpscoError, match="r0_scale: not a setting of method ipd"):
        MethodConfig().with_settings(["r0_scale=2"])


def test_a_seed_out_of_range_is_refused_before_anything_runs():
    from npsco.seeds import MAX_SEED

    for seed in (-5, MAX_SEED + 1, 2**70):
        with pytest.raises(NpscoError, match=r"seed must be in \[0, "):
            PPOConfig(seed=seed).validate()
    PPOConfig(seed=MAX_SEED).validate()


def test_the_budget_says_when_the_steps_are_not_whole_batches():
    assert PPOConfig(total_timesteps=4096, num_steps=2048).budget() == "4,096"
    assert (
        PPOConfig(total_timesteps=5000, num_steps=2048).budget() == "4,096 (5,000 asked: 2 whole iterations of 2,048)"
    )
