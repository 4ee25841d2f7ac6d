"""The configuration of a population run (`PopulationConfig`): the PPO settings shared by its policies, the novel
policies' method, R, K and the threshold multiples; `npsco.options.PopulationOptions.config` makes it from the
options of `npsco population`, of a Python call or of a grid. `configuration_differences` compares a run
directory's recorded `config.json` with a new configuration (resume).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npsco.compat import current_method_settings, current_ppo_settings, recorded_method
from npsco.errors import NpscoError
from npsco.limits import MAX_CANDIDATES
from npsco.methods import METHODS
from npsco.methods.registry import default_r0_scale
from npsco.methods.settings import MethodConfig
from npsco.ppo.config import PPOConfig
from npsco.seeds import check_population
from npsco.settings import differences
from npsco.tasks import default_distance_episodes, default_eval_episodes


@dataclass
class PopulationConfig:
    """A population run: the task's PPO settings, the references, and the novel chains."""

    ppo: PPOConfig
    """PPO settings shared by every policy of the population (references and novel ones)."""
    method: MethodConfig
    """Method of the novel policies and its knobs."""
    refs: int = 5
    """Number of PPO reference policies R (seeds S..S+R-1, S = `ppo.seed`: `--set seed=S` gives an independent
    replicate)."""
    novel: int = 5
    """Number of novel policies K per chain."""
    r0_scales: tuple[float, ...] | None = None
    """Thresholds as multiples of the default r0 (the references' mean pairwise distance), one chain each; ignored
    when `method.r0` is set. None: the method's default multiple (`npsco.methods.registry.MethodEntry.r0_scale`);
    `validate` fills it in, so config.json records the multiples used."""
    refs_from: str | None = None
    """Reuse the references of this earlier population run directory instead of training them."""
    ref_checkpoints: tuple[str, ...] = ()
    """Use these policy checkpoints (files, or `npsco train` run directories) as the references instead of training
    them; e.g. PPO policies trained with `npsco train` or by a benchmark."""
    threshold_episodes: int | None = None
    """Deterministic episodes per reference for the threshold (None: 50 on the maze, 5 on MuJoCo)."""
    eval_episodes: int | None = None
    """Deterministic episodes of each policy's final evaluation (None: 100 on the maze, 10 otherwise)."""
    candidates: int = 1
    """Candidates trained for each novel policy (slot) of a chain: the first that meets the criteria is kept, else
    the one closest to meeting them (`npsco.selection`); the others are recorded in the manifest as dropped. 1: no
    selection, as the paper."""
    candidate_episodes: int | None = None
    """Deterministic episodes (seeded as the final evaluation's) on whose visited states a candidate's distance to the
    nearest policy it had to avoid is measured, for the criteria (None: those of its final evaluation,
    `eval_episodes`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ppo": self.ppo.to_dict(),
            "method": self.method.to_dict(),
            "refs": self.refs,
            "novel": self.novel,
            "r0_scales": None if self.r0_scales is None else list(self.r0_scales),
            "refs_from": self.refs_from,
            "ref_checkpoints": list(self.ref_checkpoints),
            "threshold_episodes": self.threshold_episodes,
            "eval_episodes": self.eval_episodes,
            "candidates": self.candidates,
            "candidate_episodes": self.candidate_episodes,
        }

    @property
    def trainings(self) -> int:
        """The policies this population trains: its own references, and each chain's novel policies (every
        candidate of each)."""
        own_refs = 0 if self.refs_from or self.ref_checkpoints else self.refs
        chains = len(self.r0_scales) if self.method.method != "ppo" and self.r0_scales else 1
        return own_refs + chains * self.novel * self.candidates

    def validate(self) -> PopulationConfig:
        self.ppo.validate()
        if self.r0_scales is None:  # an absolute --r0 needs no multiple
            self.r0_scales = (1.0,) if self.method.r0 is not None else (default_r0_scale(self.method.method),)
        self.r0_scales = tuple(float(s) for s in self.r0_scales)
        self.method.validate()
        if self.refs < 0 or self.novel < 0:
            raise NpscoError("--refs and --novel must be >= 0")
        if not 1 <= self.candidates <= MAX_CANDIDATES:
            raise NpscoError(f"--candidates must be between 1 and {MAX_CANDIDATES}, got {self.candidates}")
        if self.candidates > 1 and self.method.method == "ppo":
            raise NpscoError("--candidates selects novel policies by the criteria; plain PPO seeds have none")
        if self.refs_from and self.ref_checkpoints:
            raise NpscoError("--refs-from and --ref-checkpoints are alternatives; give one")
        borrowed = bool(self.refs_from or self.ref_checkpoints)
        check_population(self.ppo.seed, 0 if borrowed else self.refs, self.novel, self.candidates)
        if self.method.method != "ppo" and self.novel > 0 and self.method.r0 is None and self.refs < 2 and not borrowed:
            raise NpscoError("the default threshold needs at least 2 references (--refs >= 2), or give --r0")
        if self.method.method != "ppo" and self.novel > 0 and self.refs == 0 and not borrowed:
            raise NpscoError("novel policies need references: --refs >= 1, --refs-from RUN or --ref-checkpoints")
        if not self.r0_scales or not all(0 < s < float("inf") for s in self.r0_scales):
            raise NpscoError(f"--r0-scale values must be finite and > 0, got {list(self.r0_scales)}")
        if self.method.r0 is not None and METHODS[self.method.method].uses_profile(self.method):
            raise NpscoError(
                "r0_profile=reference scales the references' own threshold profile: it cannot be combined "
                "with an absolute --r0 (use --r0-scale)"
            )
        if self.method.r0 is not None and tuple(self.r0_scales) != (1.0,):
            raise NpscoError(
                "--r0 (an absolute threshold) and --r0-scale (multiples of the default) are alternatives; give one"
            )
        return self

    @property
    def final_episodes(self) -> int:
        return self.eval_episodes or default_eval_episodes(self.ppo.env_id)

    @property
    def check_episodes(self) -> int:
        """The episodes of a candidate's check against the criteria (`candidate_episodes`)."""
        return self.candidate_episodes or self.final_episodes

    @property
    def distance_episodes(self) -> int:
        return self.threshold_episodes or default_distance_episodes(self.ppo.env_id)


def reference_count(refs: int | None, refs_from: str | Path | None, ref_checkpoints: Sequence[str | Path]) -> int:
    """R, the PPO references a run trains: `refs` (None: 5). Refuses `refs` given with references borrowed from a run
    or from checkpoints, which would be ignored: there are as many references as those."""
    borrowed = "--refs-from" if refs_from else "--ref-checkpoints" if ref_checkpoints else None
    if refs is not None and borrowed:
        source = "those of that run" if refs_from else "the checkpoints given"
        raise NpscoError(f"--refs {refs} does not apply with {borrowed}: the references are {source}; leave --refs out")
    return PopulationConfig.refs if refs is None else refs


def same_configuration(stored: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether a run directory's `config.json` (`stored`) describes the configuration `current`.

    A setting missing from `stored` (one that npsco gained after the run started) matches when `current` has that
    setting's default value, so upgrading npsco does not stop a run from resuming; any other difference does.
    """
    return not configuration_differences(stored, current)


def configuration_differences(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The settings in which `stored` and `current` differ (see `same_configuration`), e.g.
    `"r0_scales: [1.0] in the run, [0.5] now"`. A run recorded by an earlier npsco is read as this one records it
    (`npsco.compat.current_method_settings`, `current_ppo_settings`). With borrowed references `refs` is not
    compared: it trains nothing (an earlier npsco took `--refs` beside `--refs-from` and recorded it)."""
    method = str((current.get("method") or {}).get("method", "ipd"))
    defaults = PopulationConfig(ppo=PPOConfig(), method=MethodConfig(method=method)).to_dict()
    if "method" in stored:
        stored = {**stored, "method": current_method_settings(stored["method"])}
    if "ppo" in stored:
        stored = {**stored, "ppo": current_ppo_settings(stored["ppo"])}
    if current.get("refs_from") or current.get("ref_checkpoints"):
        stored, current = {**stored, "refs": None}, {**current, "refs": None}
    stored, current = _with_resolved_paths(stored), _with_resolved_paths(current)
    found = differences(stored, current, defaults)
    was = recorded_method(stored)
    if was is not None and was != method:  # another method: its settings differ as a consequence, say the cause
        first = f"method: {was!r} in the run, {method!r} now (--method {was} resumes it)"
        return [first, *(d for d in found if not d.startswith("method."))]
    return found


def _with_resolved_paths(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with its reference paths made absolute (against the working folder): `--refs-from runs/x` resumes a
    run that recorded `/home/me/runs/x`, or the reverse."""
    out = dict(config)
    if isinstance(out.get("refs_from"), str) and out["refs_from"]:
        out["refs_from"] = str(Path(out["refs_from"]).resolve())
    if isinstance(out.get("ref_checkpoints"), (list, tuple)):
        out["ref_checkpoints"] = [str(Path(p).resolve()) for p in out["ref_checkpoints"]]
    return out
