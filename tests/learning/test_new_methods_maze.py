"""Learning test: the Lagrangian method (its default settings, and both distances at once) and RSPO, at the paper's
threshold (1 x r0), against PPO references on the maze, each yield a policy that still reaches a goal from most starts
while its deterministic behaviour is at least r0 away from every reference."""

import numpy as np
import pytest

from npsco.episodes import run_episodes
from npsco.methods.settings import MethodConfig
from npsco.novelty.metrics import policy_distance
from npsco.population import Population, PopulationConfig
from npsco.ppo.config import preset
from npsco.tasks import MAZE_ID


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, settings, reach",
    [
        ("lagrangian", {}, 0.8),
        ("lagrangian", {"lagrangian_joint": True}, 0.8),
        # (the return-constrained form has no case: on seeds 1-5 it stays under r0 wherever the references are apart,
        # benchmarks/results/rowwise/maze_learning.md)
        ("rspo", {}, 0.8),
    ],
    ids=["lagrangian", "lagrangian-joint", "rspo"],
)
def test_the_method_on_the_maze_is_novel_and_still_reaches_goals(method, settings, reach, tmp_path):
    config = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of(method, **settings), refs=2, novel=1)
    pop = Population(tmp_path / "pop", config, progress=False, log=lambda line: None)
    members = pop.run()
    refs = [pop.policy(m) for m in members if m.role == "reference"]
    (novel,) = [m for m in members if m.role == "novel"]
    policy = pop.policy(novel)
    episodes = run_episodes(policy, 100, seed=12345, record_states=True)
    reached = float(np.mean(episodes.goals >= 0))
    states = np.concatenate(episodes.states)
    nearest = min(policy_distance(policy.mean_action(states), r.mean_action(states)) for r in refs)
    summary = {**episodes.summary(), "nearest": nearest, "r0": novel.threshold}
    assert config.r0_scales == (1.0,) and novel.threshold == pop.r0_default
    assert reached >= reach, summary
    assert nearest >= novel.threshold, summary
