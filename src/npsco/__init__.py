"""npsco: novel policy seeking with constrained optimization (Interior Policy Differentiation on PPO).

Public API: `npsco.load_policy(path) -> npsco.Policy` (docs/checkpoints.md); `npsco.train`, `npsco.train_population`,
`npsco.make_ppo_config`, `npsco.make_population_config` (`npsco.api`, docs/python.md); the `npsco` command (README).
"""

import os
from typing import TYPE_CHECKING, Any

from npsco.version import __version__  # imports nothing: the BLAS settings below still come before numpy

# One BLAS thread, as torch.set_num_threads(1): npsco's matrices are tiny, and BLAS threads competing for a few shared
# cores slow them down (benchmarks/results/throughput/design_measurements.md). Only effective when npsco is imported
# before numpy (as the `npsco` command is); set the variables yourself, or use threadpoolctl, when you import numpy
# first.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

_API = ("train", "train_population", "make_ppo_config", "make_population_config")
__all__ = [
    "load_policy",
    "Policy",
    "train",
    "train_population",
    "make_ppo_config",
    "make_population_config",
    "__version__",
]

if TYPE_CHECKING:
    from npsco.api import make_population_config, make_ppo_config, train, train_population
    from npsco.policy import Policy, load_policy


def __dir__() -> list[str]:
    # the public API is loaded lazily (`__getattr__`): listed all the same
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    # Imported lazily so that `import npsco` (and the CLI's --help) stays fast: policy.py imports gymnasium,
    # api.py torch.
    if name in ("load_policy", "Policy"):
        from npsco import policy  # lazy: gymnasium

        return getattr(policy, name)
    if name in _API:
        from npsco import api  # lazy: torch

        return getattr(api, name)
    raise AttributeError(f"module 'npsco' has no attribute {name!r}")
