"""PPO, the core every method builds on: its settings (`config`), network (`agent`), rollout, maths, learner, fast
update and trainer (`train.train` trains one policy). Importing the package loads nothing: `npsco.ppo.config` is read
by commands that must not load torch."""
