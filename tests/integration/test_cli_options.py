"""Options of `npsco population` beyond the settings: the warning for a threshold that no pair of references
reaches. The refusals of bad input are in the table of test_reliability.py."""

from __future__ import annotations

import numpy as np
import pytest

from npsco.cli import main
from npsco.population_jobs import unreached_thresholds
from npsco.ppo.trainer import Trainer


# ------------------------------------------------------------------------------------------ unreachable thresholds
def test_a_threshold_above_every_reference_distance_is_named():
    distances = np.array([[0.0, 0.4, 0.2], [0.6, 0.0, 0.3], [0.1, 0.5, 0.0]])
    assert unreached_thresholds({"ipd": 0.6}, distances, absolute=True) is None  # ref1 -> ref0 reaches it
    warning = unreached_thresholds({"ipd-r0x1": 0.3, "ipd-r0x3": 0.9}, distances, absolute=False)
    assert warning is not None and warning.startswith(
        "warning: r0 = 0.9 (ipd-r0x3) is above the largest distance between two references (0.6): no reference pair "
        "reaches it"
    )
    assert warning.endswith("consider a smaller --r0-scale")
    assert unreached_thresholds({"ipd": 0.61}, distances, absolute=True).startswith("warning: r0 = 0.61 is above")


def stop_training(monkeypatch):
    """Training raises Ctrl-C at once: what a command printed before it trains is what is checked."""

    def interrupted(self, progress=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "train", interrupted)


@pytest.mark.parametrize(
    ("threshold", "warned"),
    [
        (["--r0", "0.6"], "warning: r0 = 0.6 is above the largest distance between two references (0.5)"),
        (["--r0", "0.3"], None),
        (["--r0-scale", "1", "3"], "warning: r0 = 1.5 (ipd-r0x3) is above the largest distance"),
    ],
)
def test_population_warns_before_training_a_threshold_no_reference_pair_reaches(
    tmp_path, planned_run, monkeypatch, capsys, threshold, warned
):
    argv = planned_run(tmp_path / "pop", threshold)  # references acting (-1, 0) and (-1, 0.5): 0.5 apart
    stop_training(monkeypatch)
    assert main(argv) == 130
    out = capsys.readouterr().out
    if warned is None:
        assert "warning" not in out
    else:
        assert warned in out and out.count("warning") == 1
        assert out.index("warning") < out.index("/k0:")  # before the novel policy trains
