"""Evaluation, in the order of the data flow:

    episodes.py   deterministic episodes of one policy (`run_episodes`); `npsco evaluate CHECKPOINT`
    runs.py       a population run directory as evaluation reads it (`load_run`)
    measure.py    each policy's episodes and visited states, and the distances between policies
    rows.py       `EvaluationRow`, one policy's results (the columns of evaluation.csv); groups and their order
    scoring.py    success and relative novelty (paper Sec. 4.2), and the per-group statistics
    evaluate.py   a population run whole (`evaluate_run`), several runs (`evaluate_runs`), cached, combined, written

Only the episodes are imported here: training runs them, and must not pay for the analysis' imports (scipy, numba).
"""

from npsco.evaluation.episodes import Episodes, run_episodes

__all__ = ["Episodes", "run_episodes"]
