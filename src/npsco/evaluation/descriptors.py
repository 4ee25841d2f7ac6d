"""How a policy moves, in numbers a person reads: behaviour descriptors of its deterministic evaluation episodes on a
MuJoCo locomotion task (forward speed, torso height and pitch, each foot's contact duty factor, the step frequency),
so that a report can say "k2 hops at 2.1 Hz leaning forward" instead of giving a distance alone.

The episodes record observations only; each one is put back into the simulator to find the feet's contacts. That
needs Gymnasium's layout of the -v5 (and -v4) locomotion tasks: the observation is the joint positions without the
root's x, then the joint velocities (`exclude_current_positions_from_observation`, the default), so that
qpos = (0, obs[:nq - 1]) and the root's forward velocity is obs[nq - 1]. A task laid out otherwise gets none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from npsco.envs.make import make_env

FOOT = "foot"
"""A geom whose name contains this (Hopper's and Walker2d's `foot_geom`, HalfCheetah's `bfoot`, `ffoot`) is a foot."""


@dataclass(frozen=True)
class Descriptors:
    """One policy's behaviour over its evaluation episodes."""

    forward_speed: float
    """Mean forward velocity of the root (m/s), over every step."""
    height_mean: float
    """Mean torso height (the root's z; HalfCheetah's is relative to its start), m."""
    height_std: float
    """Its spread (std over steps), m."""
    pitch_mean: float
    """Mean torso pitch (the root's rotation about y), rad; its sign is the task's own convention."""
    pitch_std: float
    """Its spread, rad."""
    duty: dict[str, float]
    """Per foot (geom name): the fraction of steps in which it touches the floor."""
    step_frequency: float | None
    """Touchdowns (a foot's contact beginning) per second, averaged over the feet; None without feet."""

    def to_dict(self) -> dict:
        return {
            "forward_speed": self.forward_speed,
            "height_mean": self.height_mean,
            "height_std": self.height_std,
            "pitch_mean": self.pitch_mean,
            "pitch_std": self.pitch_std,
            "duty": dict(self.duty),
            "step_frequency": self.step_frequency,
        }

    def words(self) -> str:
        """A line a person reads: `2.31 m/s, 2.1 steps/s, torso 1.25 m pitched +0.05 rad, feet on the floor 41%`."""
        feet = ", ".join(f"{name} {100 * d:.0f}%" for name, d in self.duty.items())
        steps = f", {self.step_frequency:.1f} touchdowns/s" if self.step_frequency is not None else ""
        return (
            f"{self.forward_speed:.2f} m/s{steps}, torso at {self.height_mean:.2f} +- {self.height_std:.2f} m, "
            f"pitch {self.pitch_mean:+.2f} +- {self.pitch_std:.2f} rad" + (f"; on the floor: {feet}" if feet else "")
        )


CELLS = ("speed (m/s)", "touchdowns/s", "torso height (m)", "pitch (rad)", "feet on floor")
"""The headers of `cells`."""


def cells(row: dict) -> list[str]:
    """An evaluation row's descriptors as table cells, in the order of `CELLS` (`2.50`, `1.7`, `1.20 +- 0.10`,
    `+0.05 +- 0.09`, `foot_geom 35%`)."""
    feet = ", ".join(f"{foot} {100 * d:.0f}%" for foot, d in (row.get("duty") or {}).items())
    return [
        f"{row['forward_speed']:.2f}",
        "-" if row.get("step_frequency") is None else f"{row['step_frequency']:.1f}",
        f"{row['height_mean']:.2f} +- {row['height_std']:.2f}",
        f"{row['pitch_mean']:+.2f} +- {row['pitch_std']:.2f}",
        feet or "-",
    ]


def duty_factor(contact: Sequence[np.ndarray]) -> float:
    """The fraction of steps in contact, over episodes of a (steps,) boolean contact signal each."""
    total = sum(len(c) for c in contact)
    return float(sum(int(np.count_nonzero(c)) for c in contact) / total) if total else 0.0


def touchdowns(contact: np.ndarray) -> int:
    """How many times contact begins in one episode's (steps,) signal (a first step in contact counts as none: the
    episode starts on the ground)."""
    c = np.asarray(contact, bool)
    return int(np.count_nonzero(c[1:] & ~c[:-1]))


def step_frequency(contacts: Sequence[Sequence[np.ndarray]], dt: float) -> float | None:
    """Touchdowns per second, averaged over the feet: `contacts[f][e]` is foot f's signal in episode e, `dt` the
    seconds per step. None without feet or steps."""
    if not contacts:
        return None
    seconds = sum(len(c) for c in contacts[0]) * dt
    if seconds <= 0:
        return None
    return float(np.mean([sum(touchdowns(c) for c in foot) / seconds for foot in contacts]))


def describe(env_id: str, episodes: Sequence[np.ndarray]) -> Descriptors | None:
    """The descriptors of the episodes' observations (`Episodes.states`) on `env_id`; None for a task that is not a
    MuJoCo task laid out as the module docstring says (the maze, a user's own task)."""
    import mujoco  # lazy: only MuJoCo tasks are described

    env = make_env(env_id)
    try:
        model, data = getattr(env.unwrapped, "model", None), getattr(env.unwrapped, "data", None)
        dt = getattr(env.unwrapped, "dt", None)
        if not isinstance(model, mujoco.MjModel) or data is None or dt is None:
            return None
        if not episodes or any(e.ndim != 2 or e.shape[1] != model.nq - 1 + model.nv for e in episodes):
            return None
        floor = [i for i in range(model.ngeom) if model.geom_bodyid[i] == 0]  # the world's own geoms: the ground
        feet = {
            i: name
            for i in range(model.ngeom)
            if FOOT in (name := mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, i) or "")
        }
        contacts: dict[int, list[np.ndarray]] = {i: [] for i in feet}
        for obs in episodes:
            signal = {i: np.zeros(len(obs), bool) for i in feet}
            for t, o in enumerate(obs):
                data.qpos[0], data.qpos[1:] = 0.0, o[: model.nq - 1]
                data.qvel[:] = o[model.nq - 1 :]
                mujoco.mj_kinematics(model, data)
                mujoco.mj_collision(model, data)
                for c in data.contact[: data.ncon]:
                    for a, b in ((c.geom1, c.geom2), (c.geom2, c.geom1)):
                        if a in signal and b in floor:
                            signal[a][t] = True
            for i in feet:
                contacts[i].append(signal[i])
        stacked = np.concatenate(episodes)
        return Descriptors(
            forward_speed=float(stacked[:, model.nq - 1].mean()),
            height_mean=float(stacked[:, 0].mean()),
            height_std=float(stacked[:, 0].std()),
            pitch_mean=float(stacked[:, 1].mean()),
            pitch_std=float(stacked[:, 1].std()),
            duty={feet[i]: duty_factor(contacts[i]) for i in feet},
            step_frequency=step_frequency([contacts[i] for i in feet], float(dt)),
        )
    finally:
        env.close()
