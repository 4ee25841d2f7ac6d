"""Evaluation of trained policies and population runs, in the order of the data flow:

    runs.py       a population run directory as evaluation reads it (`load_run`)
    measure.py    each policy's episodes and visited states, and the distances between policies
    rows.py       `EvaluationRow`, one policy's results (the columns of evaluation.csv); groups and their order
    descriptors.py  how each policy moves (behaviour descriptors)
    scoring.py    success and relative novelty (paper Sec. 4.2), and the per-group statistics
    evaluate.py   a population run whole (`evaluate_run`), several runs (`evaluate_runs`), cached, combined, written

Running one policy for N episodes lives below the training code that needs it, in `npsco.episodes`; `run_episodes`
and `Episodes` are also named here, where earlier versions defined them.
"""

from npsco.episodes import Episodes, run_episodes

__all__ = ["Episodes", "run_episodes"]
