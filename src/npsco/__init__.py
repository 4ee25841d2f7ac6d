"""npsco: novel policy seeking with constrained optimization (Interior Policy Differentiation on PPO).

Public API: `npsco.load_policy(path) -> npsco.Policy` (see docs/checkpoints.md); the `npsco` command (see README).
"""

import os
from typing import TYPE_CHECKING, Any

# One BLAS thread, as torch.set_num_threads(1): npsco's matrices are tiny, and BLAS threads competing for a few shared
# cores slow them down (benchmarks/results/throughput/design_measurements.md). Only effective when npsco is imported
# before numpy (as the `npsco` command is); set the variables yourself, or use threadpoolctl, when you import numpy
# first.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

__version__ = "0.1.0"
__all__ = ["load_policy", "Policy", "__version__"]

if TYPE_CHECKING:
    from npsco.policy import Policy, load_policy


def __getattr__(name: str) -> Any:
    # Imported lazily so that `import npsco` (and the CLI's --help) stays fast: policy.py imports gymnasium.
    if name in ("load_policy", "Policy"):
        from npsco import policy  # lazy: gymnasium

        return getattr(policy, name)
    raise AttributeError(f"module 'npsco' has no attribute {name!r}")
