"""A trainer's run depends on its seed only: not on what else draws from torch's or numpy's global generators while
it trains (the caller, another trainer in the same process, as in benchmarks/throughput.py's paired measurement)."""

import numpy as np
import torch

from npsco.algos.trainer import Trainer
from npsco.config import MAZE_ID, PPOConfig


def trainer(seed: int = 5) -> Trainer:
    cfg = PPOConfig(
        env_id=MAZE_ID,
        num_envs=4,
        num_steps=32,
        num_minibatches=4,
        update_epochs=2,
        eval_every=0,
        checkpoint_every=0,
        actor_hidden=(16,),
        critic_hidden=(16,),
        seed=seed,
    )
    return Trainer(cfg, None, tensorboard=False)


def iterate(tr: Trainer) -> None:
    tr.ppo_update(tr.compute_advantages(tr.collect_rollout()))


def params(tr: Trainer) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1) for p in tr.agent.parameters()]).numpy().copy()


def test_interleaved_trainers_and_foreign_draws_do_not_change_a_run():
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
