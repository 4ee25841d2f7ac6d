"""The restricted unpickler of npsco.importers.safe_pickle and the VecNormalize reader: SB3's statistics are read
exactly, and a pickle that names anything else is refused before any of it runs (the payloads here would create a
file if they ran, and the tests check that they do, with plain pickle)."""

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from npsco.errors import NpscoError
from npsco.importers.safe_pickle import Record, load_records
from npsco.importers.vecnormalize import read_vecnormalize

sb3 = pytest.importorskip("stable_baselines3", reason="stable-baselines3 (the dev extra) builds the VecNormalize files")


def vec_normalize(n_obs_updates: int = 3, **kwargs):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), **kwargs)
    venv.reset()
    for _ in range(n_obs_updates):
        venv.step(np.zeros((2, 1), np.float32))
    return venv


class _Touch:
    """Unpickling this creates `path` (through os.system: the payload of a malicious statistics file)."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


class _TouchPath(_Touch):
    def __reduce__(self):
        return Path.touch, (self.path,)


def refused(data: bytes, *fragments: str) -> str:
    with pytest.raises(NpscoError) as info:
        load_records(data, "stats.pkl")
    message = str(info.value)
    assert "\n" not in message and message.startswith("stats.pkl")
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_reads_sb3_vecnormalize_statistics_exactly(tmp_path):
    venv = vec_normalize(clip_obs=5.0, epsilon=1e-6)
    venv.save(tmp_path / "vn.pkl")
    norm = read_vecnormalize(tmp_path / "vn.pkl")
    np.testing.assert_array_equal(norm.mean, venv.obs_rms.mean)
    np.testing.assert_array_equal(norm.var, venv.obs_rms.var)
    assert (norm.clip, norm.eps) == (5.0, 1e-6)
    # the normaliser npsco builds gives SB3's normalised observations
    obs = np.random.default_rng(0).normal(size=(20, 3)) * 3
    mine = np.clip((obs - norm.mean) / np.sqrt(norm.stored_var() + 1e-8), -norm.clip, norm.clip)
    np.testing.assert_allclose(mine, venv.normalize_obs(obs), rtol=1e-6, atol=1e-6)  # SB3 returns float32


def test_sb3_classes_become_inert_records(tmp_path):
    venv = vec_normalize()
    record = load_records(pickle.dumps(venv), "vn.pkl")
    assert isinstance(record, Record) and record.name.endswith("VecNormalize")
    assert record.field("obs_rms").name.endswith("RunningMeanStd")
    assert record.field("observation_space").name == "gymnasium.spaces.box.Box"
    assert not hasattr(record, "normalize_obs")  # a record, not SB3's class


def test_a_vecnormalize_without_observation_normalisation_gives_none(tmp_path):
    vec_normalize(norm_obs=False).save(tmp_path / "vn.pkl")
    assert read_vecnormalize(tmp_path / "vn.pkl") is None


@pytest.mark.parametrize("payload", [_Touch, _TouchPath])
def test_a_payload_is_refused_without_running(tmp_path, payload):
    marker = tmp_path / "pwned"
    data = pickle.dumps({"obs_rms": payload(marker)})
    refused(data, "refused to load", "nothing from the file is run")
    assert not marker.exists()
    pickle.loads(data)  # the payload is live: plain pickle runs it
    assert marker.exists()


def test_a_payload_inside_real_statistics_is_refused_without_running(tmp_path):
    marker = tmp_path / "pwned"
    venv = vec_normalize()
    venv.obs_rms.mean = _Touch(marker)
    venv.save(tmp_path / "vn.pkl")
    with pytest.raises(NpscoError, match="posix.system|os.system"):
        read_vecnormalize(tmp_path / "vn.pkl")
    assert not marker.exists()


def test_object_arrays_and_foreign_array_types_are_refused():
    refused(pickle.dumps(np.array([1, "a"], dtype=object)), "Python objects")
    refused(pickle.dumps(np.ma.masked_array([1.0, 2.0])), "refused")


def test_numbers_and_containers_pass():
    from collections import OrderedDict, deque

    value = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": [1, 2.5, None, True, "x"],
        "c": (b"\x00",),
        "d": OrderedDict(k=np.float64(3.5)),
        "e": deque([1]),
        "f": np.array([True, False]),
    }
    out = load_records(pickle.dumps(value), "ok.pkl")
    np.testing.assert_array_equal(out["a"], value["a"])
    assert out["b"] == value["b"] and out["c"] == value["c"] and out["d"]["k"] == 3.5 and list(out["e"]) == [1]
    assert out["f"].dtype == np.bool_


def test_read_vecnormalize_refuses_other_files(tmp_path):
    (tmp_path / "dict.pkl").write_bytes(pickle.dumps({"obs_rms": 1}))
    with pytest.raises(NpscoError, match="not a VecNormalize file"):
        read_vecnormalize(tmp_path / "dict.pkl")
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle at all")
    with pytest.raises(NpscoError, match="not a readable pickle"):
        read_vecnormalize(tmp_path / "junk.pkl")
    with pytest.raises(NpscoError, match="no such VecNormalize file"):
        read_vecnormalize(tmp_path / "missing.pkl")
