"""A method's whole update with every piece in torch: the torch reference of `hooks.update(learner, batch)`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

from npsco.methods import cpo
from npsco.methods.tnb import TNB
from npsco.ppo.hooks import Hooks
from npsco.ppo.learner import Learner
from npsco.ppo.rollout import Batch
from oracles.cpo import TorchCPOProblem
from oracles.tnb import tnb_update
from oracles.torch_learner import TorchLearner


@contextlib.contextmanager
def torch_methods() -> Iterator[None]:
    """Within it, the methods' own steps run in torch when their learner is a `TorchLearner`: TNB's epochs by
    `tnb_update` (CTNB's bisector branch too), CPO's problem by `TorchCPOProblem`; PPO's update and the critics' fit
    (every other method, the Lagrangian's term included) are the `TorchLearner`'s."""
    with mock.patch.object(TNB, "update", tnb_update), mock.patch.object(cpo, "CPOProblem", TorchCPOProblem):
        yield


def torch_update(hooks: Hooks, learner: Learner, batch: Batch) -> dict[str, float]:
    """`hooks.update` on the learner's state (agent, optimiser, minibatch generator), run in torch
    (`torch_methods`). Every other step of the method's update is its own code."""
    with torch_methods():
        return hooks.update(TorchLearner(learner), batch)  # type: ignore[arg-type]
