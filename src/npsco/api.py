"""npsco from Python: train one policy (`train`) or a population of novel policies (`train_population`), with the
same settings, defaults and run directories as `npsco train` and `npsco population`. Settings are typed values (a
dict of PPO settings, a dict of the method's settings), checked before anything is written.

    import npsco

    result = npsco.train("Hopper-v5", out="runs/hopper-ppo", steps=1_000_000, seed=0)
    members = npsco.train_population("Hopper-v5", method="lagrangian", refs=5, novel=5, out="runs/hopper-lagr",
                                     workers=2)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from npsco.fields import typed_value
from npsco.logger import Tracking
from npsco.manifest import Member
from npsco.methods.settings import MethodConfig
from npsco.parallel import make_executor
from npsco.population import Population, default_population_dir
from npsco.population_config import PopulationConfig, reference_count
from npsco.population_jobs import PRELOAD
from npsco.ppo.config import PPOConfig
from npsco.ppo.train import train as train_in_memory
from npsco.ppo.trainer import TrainResult
from npsco.settings import ppo_settings
from npsco.training import train_policy


def make_ppo_config(
    env: str,
    *,
    preset: str = "default",
    seed: int = 0,
    steps: int | None = None,
    settings: dict[str, Any] | None = None,
    env_package: str | None = None,
) -> PPOConfig:
    """The PPO settings of a run: `preset`'s for the task, then `seed`, `steps` (total timesteps) and `settings` (name
    -> value, any field of `PPOConfig`), checked (a one-line `NpscoError` if not valid)."""
    env, preset = typed_value("env", env, str), typed_value("preset", preset, str)
    seed, steps = typed_value("seed", seed, int), typed_value("steps", steps, int | None)
    return ppo_settings(env, preset, seed, steps, env_package=env_package, values=settings)


def make_population_config(
    env: str,
    method: str = "ipd",
    *,
    refs: int | None = None,
    novel: int = 5,
    preset: str = "default",
    seed: int = 0,
    steps: int | None = None,
    settings: dict[str, Any] | None = None,
    method_settings: dict[str, Any] | None = None,
    r0_scales: Sequence[float] | None = None,
    refs_from: str | Path | None = None,
    ref_checkpoints: Sequence[str | Path] = (),
    env_package: str | None = None,
) -> PopulationConfig:
    """The configuration of a population run, as `npsco population` makes it from its options: R `refs` PPO references
    (default 5; or borrowed: `refs_from`, `ref_checkpoints`, without `refs`), then K `novel` policies of `method` per
    threshold multiple (`r0_scales`, default the method's; an absolute threshold is the method setting `r0`),
    checked."""
    ppo = make_ppo_config(env, preset=preset, seed=seed, steps=steps, settings=settings, env_package=env_package)
    method, novel = typed_value("method", method, str), typed_value("novel", novel, int)
    refs = typed_value("refs", refs, int | None)
    config = PopulationConfig(
        ppo=ppo,
        method=MethodConfig(method=method).with_values(dict(method_settings or {}), where="method_settings:"),
        refs=reference_count(refs, refs_from, ref_checkpoints),
        novel=novel,
        r0_scales=None if r0_scales is None else tuple(r0_scales),
        refs_from=None if refs_from is None else str(refs_from),
        ref_checkpoints=tuple(str(p) for p in ref_checkpoints),
    )
    return config.validate()


def train(
    env: str | PPOConfig,
    out: str | Path | None = None,
    *,
    progress: bool = True,
    track: Tracking | None = None,
    **settings: Any,
) -> TrainResult | None:
    """Train one PPO policy: `env` a task id (then `settings` are `make_ppo_config`'s keywords) or a `PPOConfig`.

    With `out`, as `npsco train --out OUT`: the run directory gets config.json, the metrics and the policy, an
    interrupted run resumes, and a run already trained there returns None. Without `out`, nothing is written. `track`:
    the metrics also go to Weights & Biases (`npsco.logger.Tracking`).
    """
    cfg = env if isinstance(env, PPOConfig) else make_ppo_config(env, **settings)
    if out is None:
        return train_in_memory(cfg, progress=progress, tensorboard=False, tracking=track)
    preset = str(settings.get("preset", "default"))
    return train_policy(cfg.validate(), preset, out, progress=progress, tracking=track)


def train_population(
    env: str | PopulationConfig,
    method: str = "ipd",
    *,
    out: str | Path | None = None,
    workers: int = 1,
    progress: bool = True,
    track: Tracking | None = None,
    **settings: Any,
) -> list[Member]:
    """Train (or resume) a population, as `npsco population`: `env` a task id (then `method` and `settings` are
    `make_population_config`'s) or a `PopulationConfig`. `out` defaults to `runs/population/TASK-METHOD`; `workers` > 1
    trains independent policies at the same time on a local process pool; `track`: every policy's metrics also go to
    Weights & Biases, one run per policy in one group. Returns the manifest's members (their `path`, relative to
    `out`, holds each policy: `npsco.load_policy(out / member.path)`)."""
    config = env if isinstance(env, PopulationConfig) else make_population_config(env, method, **settings)
    folder = Path(out) if out is not None else default_population_dir(config)
    pop = Population(folder, config, progress=progress, log=print, tracking=track)
    if workers == 1:
        return pop.run()
    with make_executor("local", workers, preload=PRELOAD) as executor:
        return pop.run(executor)
