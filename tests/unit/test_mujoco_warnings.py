"""MuJoCo's deprecation warning for HalfCheetah's model is not printed; other MuJoCo warnings are."""

from __future__ import annotations

from npsco.envs import mujoco_warnings
from npsco.envs.make import make_env


def test_making_halfcheetah_prints_no_settotalmass_warning(capfd):
    make_env("HalfCheetah-v5").close()
    make_env("HalfCheetah-v5").close()
    err = capfd.readouterr().err
    assert "settotalmass" not in err


def test_other_mujoco_warnings_are_still_printed(capsys):
    mujoco_warnings.print_warning("Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable.")
    mujoco_warnings.print_warning("compiler attribute 'settotalmass' is deprecated and will be removed")
    err = capsys.readouterr().err
    assert err == "MuJoCo warning: Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable.\n"
