"""A trainer's run depends on its seed only: not on what else draws from torch's or numpy's global generators while
it trains (the caller, another trainer in the same process, as in benchmarks/throughput.py's paired measurement)."""

import numpy as np
import pytest
import torch

from npsco.ppo.trainer import Trainer


@pytest.fixture
def trainer(tiny_maze):
    """`trainer(seed=5)`: a maze trainer of 4 envs x 32 steps, 4 minibatches, 2 epochs, 16-unit networks."""

    def make(seed: int = 5) -> Trainer:
        settings = dict(num_steps=32, num_minibatches=4, update_epochs=2, actor_hidden=(16,), critic_hidden=(16,))
        return Trainer(tiny_maze(**settings, seed=seed), None, tensorboard=False)

    return make


def iterate(tr: Trainer) -> None:
    tr.learner.ppo_update(tr.compute_advantages(tr.collect_rollout()))


def params(tr: Trainer) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1) for p in tr.agent.parameters()]).numpy().copy()


def test_interleaved_trainers_and_foreign_draws_do_not_change_a_run(trainer):
    alone = trainer()
    for _ in range(3):
        iterate(alone)

    first, second = trainer(), trainer(seed=6)
    for _ in range(3):
        iterate(first)
        torch.rand(1000), np.random.rand(1000)  # someone else's draws from the global generators
        iterate(second)
    np.testing.assert_array_equal(params(first), params(alone))
    assert not np.array_equal(params(second), params(alone))  # another seed: another run
