"""npsco: novel policy seeking with constrained optimization (Interior Policy Differentiation on PPO)."""

__version__ = "0.1.0"
