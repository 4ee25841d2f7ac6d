"""MuJoCo's warnings on stderr, less one that says nothing to an npsco user.

Gymnasium's HalfCheetah model sets `settotalmass`, which MuJoCo 3.3+ reports as deprecated every time the model is
compiled: once per environment, so a population's log held hundreds of copies. That one line is dropped; every other
MuJoCo warning (a simulation going unstable, say) is still printed.
"""

from __future__ import annotations

import sys

import mujoco

DROPPED = ("compiler attribute 'settotalmass' is deprecated",)
"""Starts of the MuJoCo warnings that are not printed."""

_installed = False


def print_warning(message: str) -> None:
    """MuJoCo's warning handler: print `message` to stderr unless it is one of `DROPPED`."""
    if not message.startswith(DROPPED):
        print(f"MuJoCo warning: {message}", file=sys.stderr, flush=True)


def install() -> None:
    """Route MuJoCo's warnings through `print_warning` (once per process)."""
    global _installed
    if _installed:
        return
    mujoco.set_mju_user_warning(print_warning)
    _installed = True
