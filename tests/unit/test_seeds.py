"""The seeds npsco derives (`npsco.seeds`), on exact numbers: every committed result and the training fingerprint were
made with them, so a change to one is a change of what a run trains. And a base seed whose population would pass
`MAX_SEED` is refused when the configuration is validated, candidates included, before anything trains."""

from __future__ import annotations

import dataclasses

import pytest

from npsco import seeds
from npsco.errors import NpscoError
from npsco.manifest import Candidate
from npsco.methods.settings import MethodConfig
from npsco.population import Population
from npsco.population_config import PopulationConfig
from npsco.ppo.config import PPOConfig, preset
from npsco.seeds import (
    MAX_SEED,
    candidate_seed,
    check_population,
    largest_offset,
    novel_seed,
    reference_seed,
    training_evaluation_seed,
)
from npsco.tasks import MAZE_ID


def test_the_derived_seeds_are_todays_numbers():
    assert MAX_SEED == 2_146_483_648
    assert [reference_seed(0, i) for i in range(3)] == [0, 1, 2]
    assert [reference_seed(7, i) for i in range(3)] == [7, 8, 9]
    assert [novel_seed(0, k) for k in range(3)] == [1000, 1001, 1002]
    assert novel_seed(7, 4) == 1011
    assert [candidate_seed(1002, c) for c in range(3)] == [1002, 101002, 201002]
    assert seeds.FINAL_EVALUATION == 10_000
    assert [training_evaluation_seed(t, 10) for t in (0, 1, 25)] == [1_000_000, 1_000_010, 1_000_250]
    assert seeds.DISTANCE_EPISODES == 0
    assert seeds.STATE_FEATURES == 0


def test_a_populations_plan_and_candidates_take_those_seeds(tmp_path):
    ppo = dataclasses.replace(preset(MAZE_ID), seed=3)
    config = PopulationConfig(ppo=ppo, method=MethodConfig(), refs=2, novel=2, r0_scales=(0.5, 1.0))
    members = Population(tmp_path / "run", config)._plan()
    assert [(m.name, m.seed) for m in members] == [
        ("ref0", 3),
        ("ref1", 4),
        ("ipd-r0x0.5/k0", 1003),
        ("ipd-r0x0.5/k1", 1004),
        ("ipd-r0x1/k0", 1003),
        ("ipd-r0x1/k1", 1004),
    ]
    assert [Candidate.of_slot(members[3], c).seed for c in range(3)] == [1004, 101004, 201004]
    assert not (tmp_path / "run").exists()


def test_the_largest_offset_counts_references_novel_policies_and_candidates():
    assert largest_offset(refs=5, novel=0, candidates=1) == 4
    assert largest_offset(refs=0, novel=0, candidates=1) == 0
    assert largest_offset(refs=5, novel=3, candidates=1) == 1002
    assert largest_offset(refs=5, novel=3, candidates=20) == 1_901_002
    assert largest_offset(refs=1000, novel=0, candidates=1) == 999


def test_a_base_seed_near_the_max_is_refused_up_front_with_candidates():
    largest = MAX_SEED - 201_002  # novel policy k2's candidate 2: S + 1000 + 2 + 2 x 100000
    check_population(largest, refs=5, novel=3, candidates=3)
    with pytest.raises(NpscoError) as err:
        check_population(largest + 1, refs=5, novel=3, candidates=3)
    assert str(err.value) == (
        "seed 2,146,282,647 is too large for this population: its policies would train with seeds up to "
        "2,146,483,649, past 2,146,483,648; with these --refs, --novel and --candidates the largest seed is "
        "2,146,282,646"
    )
    # the seed a single policy may take (PPOConfig) is refused for the population that would add candidates to it
    PPOConfig(seed=largest + 1).validate()
    config = PopulationConfig(
        ppo=PPOConfig(seed=largest + 1), method=MethodConfig(), refs=5, novel=3, candidates=3, r0_scales=(1.0,)
    )
    with pytest.raises(NpscoError, match="the largest seed is 2,146,282,646$"):
        config.validate()


def test_borrowed_references_add_no_offset_of_their_own():
    base = MAX_SEED - 1000  # novel policy k0 would train with MAX_SEED: allowed
    borrowed = PopulationConfig(ppo=PPOConfig(seed=base), method=MethodConfig(r0=0.5), refs_from="elsewhere", novel=1)
    assert borrowed.validate().ppo.seed == base
    with pytest.raises(NpscoError, match="the largest seed is 2,146,482,647$"):
        PopulationConfig(
            ppo=PPOConfig(seed=base), method=MethodConfig(r0=0.5), refs_from="elsewhere", novel=2
        ).validate()
    references_only = PopulationConfig(ppo=PPOConfig(seed=MAX_SEED - 4), method=MethodConfig(), refs=5, novel=0)
    assert references_only.validate().refs == 5
    with pytest.raises(NpscoError, match="the largest seed is 2,146,483,644$"):
        PopulationConfig(ppo=PPOConfig(seed=MAX_SEED - 3), method=MethodConfig(), refs=5, novel=0).validate()
