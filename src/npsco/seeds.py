"""Every seed npsco derives, in one place: a population's members and candidates from its base seed S (the PPO `seed`
setting), and the fixed seeds of its evaluations and distances. Each rule is a small pure function or a constant;
`check_population` refuses, before anything trains, a base seed whose largest derived seed would pass `MAX_SEED`.

The numbers are part of every result npsco has written (the seeds a manifest records, the training fingerprint):
changing one changes what a run trains."""

from __future__ import annotations

from npsco.errors import NpscoError

MAX_SEED = 2**31 - 1_000_000
"""The largest seed a policy trains with: numpy, torch and the environments take it, and it leaves room below int32
(envpool's seeds) for the seeds derived from it (sub-environment i is seeded seed + i)."""
NOVEL_OFFSET = 1000
"""Novel policy k of every chain trains with S + NOVEL_OFFSET + k: the same seeds in every chain and for every method,
none a reference's (S + i, i < 1000)."""
CANDIDATE_STRIDE = 100_000
"""Candidate c of a slot trains with the slot's seed + c x CANDIDATE_STRIDE (seeds no other slot uses)."""
FINAL_EVALUATION = 10_000
"""A member's final evaluation: deterministic episode i on an env seeded FINAL_EVALUATION + i (episodes training never
saw)."""
TRAINING_EVALUATION = 1_000_000
"""The evaluation during training (`eval_every`): at iteration t with n episodes, episode i runs on an env seeded
TRAINING_EVALUATION + t x n + i (`training_evaluation_seed`)."""
DISTANCE_EPISODES = 0
"""The deterministic episodes a population measures distances on (the threshold r0, the `state` embedding, the
criteria's mean-action r0): episode i on an env seeded DISTANCE_EPISODES + i."""
STATE_FEATURES = 0
"""The random features of the `state` distance (`npsco.novelty.states`): fixed, so every distance of a population
uses the same features."""


def reference_seed(base: int, i: int) -> int:
    """Reference i of a population of base seed `base`."""
    return base + i


def novel_seed(base: int, k: int) -> int:
    """Novel policy k of every chain of a population of base seed `base`."""
    return base + NOVEL_OFFSET + k


def candidate_seed(slot: int, c: int) -> int:
    """Candidate c of a slot whose own seed is `slot` (candidate 0 is the slot's own seed)."""
    return slot + CANDIDATE_STRIDE * c


def training_evaluation_seed(iteration: int, episodes: int) -> int:
    """The first env seed of the evaluation during training at `iteration`, of `episodes` episodes."""
    return TRAINING_EVALUATION + iteration * episodes


def largest_offset(refs: int, novel: int, candidates: int) -> int:
    """How far above the base seed the largest seed of a population goes: `refs` references it trains itself (0 when
    borrowed), `novel` policies per chain, `candidates` per novel policy."""
    offsets = [refs - 1] if refs > 0 else [0]
    if novel > 0:
        offsets.append(candidate_seed(novel_seed(0, novel - 1), candidates - 1))
    return max(offsets)


def check_population(base: int, refs: int, novel: int, candidates: int) -> None:
    """Refuse, in one line naming the largest base seed allowed, a base seed whose population would train a policy
    with a seed past `MAX_SEED` (see `largest_offset`)."""
    offset = largest_offset(refs, novel, candidates)
    if base + offset > MAX_SEED:
        raise NpscoError(
            f"seed {base:,} is too large for this population: its policies would train with seeds up to "
            f"{base + offset:,}, past {MAX_SEED:,}; with these --refs, --novel and --candidates the largest seed is "
            f"{MAX_SEED - offset:,}"
        )
