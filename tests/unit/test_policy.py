"""Tests of npsco.policy: the observation normaliser, the actor-critic, and the Policy checkpoint (round trip and
every refusal of the loader, which must never unpickle)."""

import json
import math
import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file, save

from npsco.errors import NpscoError
from npsco.policy import REQUIRED_METADATA, Policy, load_policy, space_metadata
from npsco.ppo.agent import ActorCritic, RunningMeanStd

OBS_DIM, ACT_DIM = 5, 3


# ---------------------------------------------------------------------------------------------------- RunningMeanStd
def with_prior(seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of `seen` pooled with the normaliser's prior (mean 0, variance 1, weight 1e-4)."""
    n, c = len(seen), 1e-4
    mean = seen.mean(0)
    return mean * n / (n + c), (c * 1.0 + n * seen.var(0) + mean**2 * c * n / (n + c)) / (n + c)


@pytest.mark.parametrize("chunks", [[40], [10, 1, 7, 1, 1, 20], [1] * 12])
def test_running_mean_std_equals_numpy_over_all_data_seen(chunks):
    rng = np.random.default_rng(0)
    data = rng.normal([3.0, -2.0, 0.5], [2.0, 0.5, 4.0], size=(sum(chunks), 3))
    rms = RunningMeanStd((3,))
    start = 0
    for n in chunks:
        rms.update(data[start : start + n])
        start += n
        seen = data[:start]
        # exactly numpy's statistics pooled with the prior, whatever the chunking ...
        mean, var = with_prior(seen)
        np.testing.assert_allclose(rms.mean, mean, rtol=1e-10)
        np.testing.assert_allclose(rms.var, var, rtol=1e-9)
        # ... and so numpy's own statistics up to the prior's weight of 1e-4 observation
        np.testing.assert_allclose(rms.mean, seen.mean(0), rtol=1e-4)
        prior_effect = 1e-4 * (1 + seen.mean(0) ** 2) / start
        assert np.all(np.abs(rms.var - seen.var(0)) <= 1e-4 * seen.var(0) + prior_effect)
    assert rms.count == pytest.approx(sum(chunks) + 1e-4)


def test_running_mean_std_normalize_clips_and_disabled_is_identity():
    rms = RunningMeanStd((2,), clip=1.5)
    rms.update(np.array([[0.0, 10.0], [2.0, 12.0], [4.0, 14.0]]))  # mean (2, 12), std (1.633, 1.633)
    out = rms.normalize(np.array([[2.0, 13.0], [100.0, -50.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0], [0.0, 1 / math.sqrt(8 / 3)], atol=1e-3)
    np.testing.assert_array_equal(out[1], [1.5, -1.5])  # clipped
    off = RunningMeanStd((2,), enabled=False)
    off.update(np.ones((4, 2)) * 7)
    np.testing.assert_array_equal(off.mean, [0.0, 0.0])
    np.testing.assert_array_equal(off.normalize(np.array([[7.0, -100.0]])), [[7.0, -100.0]])


# ------------------------------------------------------------------------------------------------------ ActorCritic
def test_evaluate_logprob_and_entropy_equal_torch_normal():
    torch.manual_seed(0)
    agent = ActorCritic(OBS_DIM, ACT_DIM, (16, 8), (16,))
    with torch.no_grad():
        agent.actor_logstd.copy_(torch.tensor([[-0.5, 0.0, 0.7]]))
    obs, actions = torch.randn(6, OBS_DIM), torch.randn(6, ACT_DIM) * 2
    logprob, entropy, mean = agent.evaluate(obs, actions)
    dist = agent.distribution(obs)
    reference = torch.distributions.Normal(agent.actor_mean(obs), agent.actor_logstd.exp().expand(6, ACT_DIM))
    torch.testing.assert_close(mean, agent.actor_mean(obs))
    torch.testing.assert_close(logprob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1)[0])
    torch.testing.assert_close(dist.log_prob(actions).sum(-1), logprob)
    assert logprob.shape == (6,) and entropy.shape == ()


def test_orthogonal_init_shapes_gains_and_biases():
    torch.manual_seed(0)
    agent = ActorCritic(OBS_DIM, ACT_DIM, (32, 10), (64, 64), init_log_std=-0.3)
    actor = [m for m in agent.actor_mean if isinstance(m, torch.nn.Linear)]
    critic = [m for m in agent.critics["task"] if isinstance(m, torch.nn.Linear)]
    assert [tuple(m.weight.shape) for m in actor] == [(32, OBS_DIM), (10, 32), (ACT_DIM, 10)]
    assert [tuple(m.weight.shape) for m in critic] == [(64, OBS_DIM), (64, 64), (1, 64)]
    assert sum(isinstance(m, torch.nn.Tanh) for m in agent.actor_mean) == 2
    for layers, out_gain in ((actor, 0.01), (critic, 1.0)):
        for i, m in enumerate(layers):
            gain = out_gain if i == len(layers) - 1 else math.sqrt(2)
            w = m.weight.detach().double()
            # orthogonal with gain g: W W^T = g^2 I (more columns than rows) or W^T W = g^2 I (more rows)
            gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
            torch.testing.assert_close(
                gram, gain**2 * torch.eye(gram.shape[0], dtype=torch.float64), atol=1e-5, rtol=1e-4
            )
            assert torch.all(m.bias == 0)
    torch.testing.assert_close(agent.actor_logstd, torch.full((1, ACT_DIM), -0.3))
    agent.add_critic("novelty")
    assert agent.value(torch.zeros(4, OBS_DIM), "novelty").shape == (4,)


# ------------------------------------------------------------------------------------------------------ checkpoints
def make_policy(seed: int = 0, norm_obs: bool = True, bounds: float = 1.0) -> Policy:
    """A policy with random weights, trained-looking normalisation statistics and the metadata `Trainer.policy`
    writes."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    agent = ActorCritic(OBS_DIM, ACT_DIM, (16, 8), (16,), init_log_std=-0.2, norm_obs=norm_obs, obs_clip=5.0)
    with torch.no_grad():  # make the last layer matter (its init gain is 0.01)
        agent.actor_mean[-1].weight.normal_()
        agent.actor_mean[-1].bias.normal_()
    agent.obs_rms.update(rng.normal(2.0, 3.0, size=(50, OBS_DIM)))
    obs_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    act_space = gym.spaces.Box(-bounds, bounds, (ACT_DIM,), np.float32)
    meta = {
        "env_id": "Hopper-v5",
        "observation_space": space_metadata(obs_space),
        "action_space": space_metadata(act_space),
        "method": "ppo",
        "seed": seed,
        "config": {"gamma": 0.99, "actor_hidden": [16, 8]},
        "method_config": {},
        "training": {"global_step": 2048, "iteration": 1},
    }
    return agent.to_policy(act_space, meta)


@pytest.fixture
def saved(tmp_path):
    policy = make_policy()
    path = policy.save(tmp_path / "policy.safetensors")
    return policy, path


def raw_observations(n=7, seed=1):
    return np.random.default_rng(seed).normal(2.0, 6.0, size=(n, OBS_DIM)).astype(np.float32)


def test_round_trip_gives_identical_actions(saved):
    policy, path = saved
    loaded = load_policy(path)
    obs = raw_observations()
    np.testing.assert_array_equal(loaded.mean_action(obs), policy.mean_action(obs))
    np.testing.assert_array_equal(loaded.act(obs, deterministic=True), policy.act(obs, deterministic=True))
    np.testing.assert_array_equal(
        loaded.act(obs, rng=np.random.default_rng(3)), policy.act(obs, rng=np.random.default_rng(3))
    )
    np.testing.assert_array_equal(loaded(obs), policy.mean_action(obs))
    np.testing.assert_array_equal(loaded.action_std, np.exp(np.float32(-0.2)) * np.ones(ACT_DIM, np.float32))
    assert not np.allclose(loaded.mean_action(obs)[0], loaded.mean_action(obs)[1])  # not a constant policy


def test_round_trip_preserves_normalisation_statistics_and_metadata(saved):
    policy, path = saved
    loaded = load_policy(path)
    np.testing.assert_array_equal(loaded.obs_mean, policy.obs_mean)
    np.testing.assert_array_equal(loaded.obs_var, policy.obs_var)
    assert not np.allclose(loaded.obs_mean, 0.0) and not np.allclose(loaded.obs_var, 1.0)
    assert (loaded.obs_clip, loaded.norm_obs) == (5.0, True)
    for key in ("env_id", "method", "seed", "config", "method_config", "training", "observation_space", "action_space"):
        assert loaded.metadata[key] == policy.metadata[key]
    assert loaded.metadata["format"] == "npsco-policy" and loaded.metadata["format_version"] == 1
    assert loaded.metadata["architecture"]["actor_hidden"] == [16, 8]
    assert loaded.metadata["obs_norm"] == {"enabled": True, "clip": 5.0, "eps": 1e-8}
    assert loaded.observation_space == gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    assert loaded.action_space == gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)


def test_normalisation_matters_and_is_applied_by_the_loaded_policy(saved):
    policy, path = saved
    loaded = load_policy(path)
    obs = raw_observations()
    normalised = np.clip((obs - policy.obs_mean) / np.sqrt(policy.obs_var + 1e-8), -5.0, 5.0)
    by_hand = normalised
    for i, (w, b) in enumerate(loaded.weights):
        by_hand = by_hand @ w.T + b
        by_hand = np.tanh(by_hand) if i < len(loaded.weights) - 1 else by_hand
    np.testing.assert_allclose(loaded.raw_mean(obs), by_hand, rtol=1e-5, atol=1e-6)
    loaded.norm_obs = False  # without its statistics the same weights act differently
    assert not np.allclose(loaded.raw_mean(obs), by_hand, atol=1e-3)


def test_round_trip_without_observation_normalisation(tmp_path):
    policy = make_policy(norm_obs=False)
    loaded = load_policy(policy.save(tmp_path / "p.safetensors"))
    assert loaded.norm_obs is False
    obs = raw_observations()
    np.testing.assert_array_equal(loaded.mean_action(obs), policy.mean_action(obs))


def test_load_accepts_a_run_directory(saved):
    policy, path = saved
    np.testing.assert_array_equal(load_policy(path.parent).weights[0][0], policy.weights[0][0])


def test_single_observation_and_batch_shapes(saved):
    loaded = load_policy(saved[1])
    obs = raw_observations()
    assert loaded.mean_action(obs[0]).shape == (ACT_DIM,)
    assert loaded.act(obs[0]).shape == (ACT_DIM,)
    assert loaded.mean_action(obs).shape == (len(obs), ACT_DIM)
    assert loaded.act(obs).shape == (len(obs), ACT_DIM)
    np.testing.assert_allclose(loaded.mean_action(obs[2]), loaded.mean_action(obs)[2], rtol=1e-6, atol=1e-7)
    assert loaded.mean_action(obs).dtype == np.float32 and loaded.act(obs).dtype == np.float32


def test_mean_action_is_clipped_to_the_bounds_but_raw_mean_is_not(tmp_path):
    policy = make_policy(bounds=0.05)
    obs = raw_observations(50)
    raw, clipped = policy.raw_mean(obs), policy.mean_action(obs)
    assert np.abs(raw).max() > 0.05  # the bounds bite
    np.testing.assert_array_equal(clipped, np.clip(raw, -0.05, 0.05))
    sampled = policy.act(obs, rng=np.random.default_rng(0))
    assert np.all(np.abs(sampled) <= 0.05)
    loaded = load_policy(policy.save(tmp_path / "p.safetensors"))
    np.testing.assert_array_equal(loaded.mean_action(obs), clipped)


# -------------------------------------------------------------------------------------------------- load refusals
def checkpoint_parts(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The tensors and the npsco metadata of a checkpoint, read without npsco."""
    raw = path.read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    return load_file(path), json.loads(header["__metadata__"]["npsco"])


def write(path: Path, tensors: dict[str, np.ndarray], meta: dict | None, **extra_metadata: str) -> Path:
    metadata = dict(extra_metadata)
    if meta is not None:
        metadata["npsco"] = json.dumps(meta)
    path.write_bytes(save(tensors, metadata=metadata or None))
    return path


def refused(path: Path, *fragments: str) -> str:
    with pytest.raises(NpscoError) as info:
        load_policy(path)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_refuses_a_missing_file(tmp_path):
    refused(tmp_path / "nothing.safetensors", "no such checkpoint")
    refused(tmp_path, "is a folder without policy.safetensors")  # a folder without a finished policy


@pytest.mark.parametrize("keep", [0, 5, 8, 100, -1])
def test_refuses_a_truncated_file(saved, tmp_path, keep):
    raw = saved[1].read_bytes()
    bad = tmp_path / "truncated.safetensors"
    bad.write_bytes(raw[:keep] if keep >= 0 else raw[:-1])
    refused(bad, "not a valid safetensors checkpoint")


def test_refuses_a_header_length_past_the_end_of_the_file(saved, tmp_path):
    raw = bytearray(saved[1].read_bytes())
    raw[:8] = (len(raw) * 2).to_bytes(8, "little")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(bytes(raw))
    refused(bad, "not a valid safetensors checkpoint")


class _CreatesMarker:
    """Unpickling this object creates the file `path`: the payload of a malicious checkpoint."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_never_unpickles_a_pickle_renamed_safetensors(tmp_path, writer):
    marker = tmp_path / "pwned"
    bad = tmp_path / "policy.safetensors"
    payload = {"actor.0.weight": _CreatesMarker(marker)}
    if writer == "pickle":
        bad.write_bytes(pickle.dumps(payload))
    else:
        torch.save(payload, bad)
    refused(bad, "not a valid safetensors checkpoint")
    assert not marker.exists()
    # the payload is live: unpickling it does create the marker
    if writer == "pickle":
        pickle.loads(bad.read_bytes())
    else:
        live = tmp_path / "live.pt"  # (torch.load reads a .safetensors name with safetensors)
        live.write_bytes(bad.read_bytes())
        torch.load(live, weights_only=False)
    assert marker.exists()


def test_refuses_a_safetensors_file_without_npsco_metadata(saved, tmp_path):
    tensors, _ = checkpoint_parts(saved[1])
    refused(write(tmp_path / "plain.safetensors", tensors, None), "not an npsco policy checkpoint")
    refused(write(tmp_path / "other.safetensors", tensors, None, format="pt"), "not an npsco policy checkpoint")
    path = tmp_path / "notjson.safetensors"
    path.write_bytes(save(tensors, metadata={"npsco": "{not json"}))
    refused(path, "not an npsco policy checkpoint")


def test_refuses_another_format_name(saved, tmp_path):
    tensors, meta = checkpoint_parts(saved[1])
    refused(write(tmp_path / "p.safetensors", tensors, {**meta, "format": "sb3"}), "not an npsco policy checkpoint")


@pytest.mark.parametrize("field", [f for f in REQUIRED_METADATA if f != "format"])
def test_refuses_missing_metadata_fields(saved, tmp_path, field):
    tensors, meta = checkpoint_parts(saved[1])
    del meta[field]
    refused(write(tmp_path / "p.safetensors", tensors, meta), "lacks", field)


def test_refuses_malformed_metadata(saved, tmp_path):
    tensors, meta = checkpoint_parts(saved[1])
    meta["architecture"] = {"activation": "tanh"}
    refused(write(tmp_path / "p.safetensors", tensors, meta), "malformed checkpoint metadata")


@pytest.mark.parametrize("version", [0, 3, "1", True])
def test_refuses_another_format_version(saved, tmp_path, version):
    tensors, meta = checkpoint_parts(saved[1])
    meta["format_version"] = version
    refused(write(tmp_path / "p.safetensors", tensors, meta), "format version", "not supported")


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("actor.0.weight", (OBS_DIM, 16)),
        ("actor.1.bias", (9,)),
        ("obs_norm.mean", (OBS_DIM + 1,)),
        ("actor.log_std", (1, ACT_DIM)),
    ],
)
def test_refuses_wrong_tensor_shapes(saved, tmp_path, name, shape):
    tensors, meta = checkpoint_parts(saved[1])
    tensors[name] = np.zeros(shape, np.float32)
    refused(write(tmp_path / "p.safetensors", tensors, meta), name, "shape")


def test_refuses_a_hidden_size_that_disagrees_with_the_tensors(saved, tmp_path):
    tensors, meta = checkpoint_parts(saved[1])
    meta["architecture"]["actor_hidden"] = [16, 9]
    refused(write(tmp_path / "p.safetensors", tensors, meta), "shape")


def test_refuses_missing_or_unexpected_tensors(saved, tmp_path):
    tensors, meta = checkpoint_parts(saved[1])
    refused(
        write(tmp_path / "a.safetensors", {k: v for k, v in tensors.items() if k != "action.low"}, meta),
        "missing ['action.low']",
    )
    refused(
        write(tmp_path / "b.safetensors", {**tensors, "actor.3.weight": np.zeros((1, 1), np.float32)}, meta),
        "unexpected ['actor.3.weight']",
    )


@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", ["actor.1.weight", "actor.log_std", "obs_norm.var"])
def test_refuses_non_finite_tensors(saved, tmp_path, name, bad_value):
    tensors, meta = checkpoint_parts(saved[1])
    tensors[name] = tensors[name].copy()
    tensors[name].flat[0] = bad_value
    refused(write(tmp_path / "p.safetensors", tensors, meta), name, "NaN or inf")


def test_refuses_float64_tensors_negative_variance_and_inverted_bounds(saved, tmp_path):
    tensors, meta = checkpoint_parts(saved[1])
    refused(
        write(
            tmp_path / "a.safetensors", {**tensors, "actor.0.bias": tensors["actor.0.bias"].astype(np.float64)}, meta
        ),
        "dtype",
    )
    refused(
        write(tmp_path / "b.safetensors", {**tensors, "obs_norm.var": -tensors["obs_norm.var"]}, meta),
        "negative observation variance",
    )
    refused(
        write(tmp_path / "c.safetensors", {**tensors, "action.low": tensors["action.high"] + 1}, meta),
        "inverted action bounds",
    )


def test_a_rewritten_valid_checkpoint_still_loads(saved, tmp_path):
    """Control for the refusal tests: the read-modify-write helpers alone do not break a checkpoint."""
    tensors, meta = checkpoint_parts(saved[1])
    loaded = load_policy(write(tmp_path / "p.safetensors", tensors, meta))
    obs = raw_observations()
    np.testing.assert_array_equal(loaded.mean_action(obs), saved[0].mean_action(obs))


def test_load_policy_is_the_public_api():
    import npsco

    assert npsco.load_policy is load_policy and npsco.Policy is Policy


# ------------------------------------------------------------------------------------------- format version 2 (imports)
def test_relu_forward_and_tanh_squash_on_exact_numbers():
    from npsco.policy import mlp_forward, squash

    layers = [
        (np.array([[1.0, -1.0], [2.0, 0.0]], np.float32), np.array([0.0, -3.0], np.float32)),
        (np.array([[1.0, 1.0]], np.float32), np.array([0.5], np.float32)),
    ]
    x = np.array([[1.0, 2.0], [3.0, 1.0]], np.float32)
    # hidden pre-activations: [-1, -1] and [2, 3]; relu -> [0, 0] and [2, 3]; output 0.5 and 5.5
    np.testing.assert_array_equal(mlp_forward(layers, x, "relu"), [[0.5], [5.5]])
    np.testing.assert_allclose(
        mlp_forward(layers, x, "tanh"), [[2 * np.tanh(-1.0) + 0.5], [np.tanh(2) + np.tanh(3) + 0.5]], rtol=1e-6
    )
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 10.0])
    np.testing.assert_allclose(squash(np.array([0.0, 0.0]), low, high), [0.0, 5.0])
    np.testing.assert_allclose(squash(np.array([50.0, -50.0]), low, high), [2.0, 0.0])  # saturates at the bounds
    np.testing.assert_allclose(squash(np.array([np.arctanh(0.5), 0.0]), low, high), [1.0, 5.0])


def version_2_policy(activation="relu", output="tanh", deterministic=True) -> Policy:
    p = make_policy(bounds=2.0)
    p.activation, p.output = activation, output
    if deterministic:
        p.log_std = np.full(ACT_DIM, -np.inf, np.float32)
    return p


@pytest.mark.parametrize(
    ("activation", "output", "deterministic"),
    [("relu", "tanh", True), ("relu", "linear", False), ("tanh", "tanh", True), ("tanh", "linear", True)],
)
def test_version_2_round_trip(tmp_path, activation, output, deterministic):
    policy = version_2_policy(activation, output, deterministic)
    path = policy.save(tmp_path / "v2.safetensors")
    loaded = load_policy(path)
    meta = loaded.metadata
    assert meta["format_version"] == 2
    assert meta["architecture"] == {
        "actor_hidden": [16, 8],
        "activation": activation,
        "output": output,
        "log_std": "none" if deterministic else "state-independent",
    }
    assert (loaded.activation, loaded.output, loaded.deterministic_only) == (activation, output, deterministic)
    assert ("actor.log_std" in load_file(path)) != deterministic
    obs = raw_observations(50)
    np.testing.assert_array_equal(loaded.mean_action(obs), policy.mean_action(obs))
    x = policy.normalize(obs)
    for w, b in policy.weights[:-1]:
        x = x @ w.T + b
        x = np.maximum(x, 0) if activation == "relu" else np.tanh(x)
    x = x @ policy.weights[-1][0].T + policy.weights[-1][1]
    expected = -2 + (np.tanh(x) + 1) * 2 if output == "tanh" else np.clip(x, -2, 2)
    np.testing.assert_allclose(loaded.mean_action(obs), expected, rtol=1e-5, atol=1e-6)
    if deterministic:  # no noise: a sample is the mean action, and the std is 0
        np.testing.assert_array_equal(loaded.act(obs, rng=np.random.default_rng(0)), loaded.mean_action(obs))
        np.testing.assert_array_equal(loaded.action_std, np.zeros(ACT_DIM))


def test_npsco_policies_are_still_written_and_read_as_version_1(saved, tmp_path):
    policy, path = saved
    assert load_policy(path).metadata["format_version"] == 1 and policy.format_version == 1
    tensors, meta = checkpoint_parts(path)
    meta["architecture"]["activation"] = "relu"  # version 1 ignores the field: its architecture is fixed
    np.testing.assert_array_equal(
        load_policy(write(tmp_path / "p.safetensors", tensors, meta)).mean_action(raw_observations()),
        policy.mean_action(raw_observations()),
    )


@pytest.mark.parametrize("field", [{"activation": "gelu"}, {"output": "sigmoid"}, {"log_std": "state-dependent"}])
def test_version_2_refuses_an_unknown_architecture(tmp_path, field):
    tensors, meta = checkpoint_parts(version_2_policy().save(tmp_path / "v2.safetensors"))
    meta["architecture"].update(field)
    refused(write(tmp_path / "p.safetensors", tensors, meta), "unknown architecture")


def test_version_2_refuses_a_missing_or_an_unexpected_log_std(tmp_path):
    tensors, meta = checkpoint_parts(version_2_policy(deterministic=False).save(tmp_path / "a.safetensors"))
    meta["architecture"]["log_std"] = "none"
    refused(write(tmp_path / "p.safetensors", tensors, meta), "unexpected ['actor.log_std']")
    del tensors["actor.log_std"]
    meta["architecture"]["log_std"] = "state-independent"
    refused(write(tmp_path / "q.safetensors", tensors, meta), "missing ['actor.log_std']")


def test_reference_set_runs_other_architectures_exactly():
    from npsco.novelty.references import ReferenceSet

    policies = [make_policy(0), version_2_policy("relu", "tanh"), make_policy(1), version_2_policy("tanh", "tanh")]
    refs = ReferenceSet(policies)
    obs = raw_observations(40)
    expected = np.stack([p.mean_action(obs) for p in policies])
    np.testing.assert_allclose(refs.mean_actions(obs), expected, rtol=1e-5, atol=1e-6)
    assert refs.std[1].tolist() == [0.0] * ACT_DIM  # a deterministic reference has no noise
