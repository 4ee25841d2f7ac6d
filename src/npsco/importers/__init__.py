"""`npsco import`: policies trained by other libraries -> npsco checkpoints (docs/import.md).

- `sb3.py`: Stable-Baselines3 `.zip` files (PPO, A2C, SAC, TD3 with MLP policies on Box actions);
- `vecnormalize.py`: SB3's VecNormalize statistics (a pickle read by `safe_pickle.py`, which runs nothing from it);
- `cleanrl.py`: CleanRL's continuous-action PPO checkpoints (`torch.save(agent.state_dict())`);
- `common.py`: what every importer shares (the task's spaces, the observation normaliser, the checkpoint).

Nothing from an imported file is unpickled into code: weights are read with `torch.load(weights_only=True)`.
"""
