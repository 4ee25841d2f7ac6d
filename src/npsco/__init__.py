"""npsco: novel policy seeking with constrained optimization (Interior Policy Differentiation on PPO).

Public API: `npsco.load_policy(path) -> npsco.Policy` (see docs/checkpoints.md); the `npsco` command (see README).
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["load_policy", "Policy", "__version__"]

if TYPE_CHECKING:
    from npsco.policy import Policy, load_policy


def __getattr__(name: str) -> Any:
    # Imported lazily so that `import npsco` (and the CLI's --help) stays fast: policy.py imports torch.
    if name in ("load_policy", "Policy"):
        from npsco import policy

        return getattr(policy, name)
    raise AttributeError(f"module 'npsco' has no attribute {name!r}")
