"""Training: PPO (`npsco.algos.ppo.train`) and the novelty methods, registered by name in `METHODS`."""

from npsco.algos.registry import METHODS, NOVELTY_METHODS, make_method

__all__ = ["METHODS", "NOVELTY_METHODS", "make_method"]
