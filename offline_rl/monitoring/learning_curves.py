"""Learning curves of a run folder, drawn from its ``result.json``: losses, evaluation
return, off-policy estimates and throughput."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offline_rl.errors import DataFormatError
from offline_rl.monitoring.result_log import RESULT_FILE, flatten, read_results

LOSSES = "learners/default_policy/"
HELD_OUT_LOSSES = "evaluation/offline_eval_runner_results/default_policy/"
RETURN = "evaluation/env_runners/episode_return_mean"
RETURN_STD = "evaluation/env_runners/episode_return_std"
ESTIMATES = "evaluation/off_policy_estimation/"
THROUGHPUT = "learners/__all_modules__/num_env_steps_trained_lifetime_throughput"


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(row["training_iteration"], row[key]) for row in rows
              if isinstance(row.get(key), int | float)]
    return [x for x, _ in points], [y for _, y in points]


def plot_learning_curves(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draws the run's curves into one PNG (``<run_dir>/learning_curves.png`` unless ``out``):
    the training loss terms (and the held-out ones, dashed), the evaluation return (± std),
    each off-policy estimate of ``v_target`` with its std as error bars beside ``v_behavior``,
    and env steps trained per second. Returns the file. Needs matplotlib
    (``pip install 'offline-rl[plot]'``).

    Example:
        >>> import tempfile
        >>> from offline_rl.monitoring.result_log import ResultLog
        >>> run = Path(tempfile.mkdtemp())
        >>> with ResultLog(run, tensorboard=False) as log:
        ...     for i in range(1, 4):
        ...         log.write({"training_iteration": i,
        ...                    "learners": {"default_policy": {"total_loss": 1.0 / i}}})
        >>> plot_learning_curves(run).name
        'learning_curves.png'
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError("plotting needs matplotlib: pip install 'offline-rl[plot]'"
                          ) from error
    run_dir = Path(run_dir)
    rows = [flatten(result) for result in read_results(run_dir)]
    if not rows:
        raise DataFormatError(f"{run_dir / RESULT_FILE} holds no results yet")
    keys = list(dict.fromkeys(key for row in rows for key in row))
    figure = Figure(figsize=(11, 7.5), layout="constrained")
    figure.suptitle(run_dir.name)
    losses, returns, estimates, throughput = figure.subplots(2, 2).flat
    for key in keys:
        if key.startswith(LOSSES) and key.endswith("_loss"):
            losses.plot(*_series(rows, key), label=key[len(LOSSES):])
        elif key.startswith(HELD_OUT_LOSSES) and key.endswith("total_loss"):
            losses.plot(*_series(rows, key), "--", label="held-out total_loss")
    iterations, means = _series(rows, RETURN)
    if means:
        returns.plot(iterations, means, marker="o", label="mean")
        _, stds = _series(rows, RETURN_STD)
        if len(stds) == len(means):
            returns.fill_between(iterations, [m - s for m, s in zip(means, stds)],
                                 [m + s for m, s in zip(means, stds)], alpha=0.2, label="± std")
    for key in keys:
        if key.startswith(ESTIMATES) and key.endswith("/v_target"):
            name = key[len(ESTIMATES):-len("/v_target")]
            x, y = _series(rows, key)
            _, std = _series(rows, f"{ESTIMATES}{name}/v_target_std")
            estimates.errorbar(x, y, yerr=std if len(std) == len(y) else None, capsize=3,
                               marker="o", label=name)
            behaviour_x, behaviour = _series(rows, f"{ESTIMATES}{name}/v_behavior")
    if any(key.startswith(ESTIMATES) for key in keys):
        estimates.plot(behaviour_x, behaviour, "k:", label="logged (v_behavior)")
    throughput.plot(*_series(rows, THROUGHPUT))
    for axes, title, ylabel in (
            (losses, "losses", "loss"), (returns, "evaluation return", "return"),
            (estimates, "off-policy estimates (± std over episodes)", "discounted return"),
            (throughput, "throughput", "env steps trained / s")):
        axes.set_title(title)
        axes.set_xlabel("training iteration")
        axes.set_ylabel(ylabel)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize="small")
        if not axes.has_data():
            axes.text(0.5, 0.5, "not in this run", ha="center", va="center",
                      transform=axes.transAxes, color="gray")
    out = Path(out) if out is not None else run_dir / "learning_curves.png"
    figure.savefig(out, dpi=100)
    return out
