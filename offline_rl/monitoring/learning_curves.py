"""Learning curves of a run folder, drawn from its ``result.json``: losses, evaluation
return, off-policy estimates and throughput, each panel only where the run has its figures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from offline_rl.errors import DataFormatError
from offline_rl.monitoring.result_log import RESULT_FILE, flatten, read_results
from offline_rl.names import ALL_MODULES

LEARNERS = "learners/"
LOSSES = "learners/default_policy/"
HELD_OUT_LOSSES = "evaluation/offline_eval_runners/default_policy/"
RETURN = "evaluation/env_runners/episode_return_mean"
RETURN_STD = "evaluation/env_runners/episode_return_std"
MODULE_RETURNS = "evaluation/env_runners/module_episode_returns_mean/"
ESTIMATES = "evaluation/off_policy_estimation/"
STEPS = "learners/__all_modules__/num_env_steps_trained"
TRAIN_TIME = "time_this_iter_s"


def _unzip(points: list[tuple[int, float]]) -> tuple[list[int], list[float]]:
    return [x for x, _ in points], [y for _, y in points]


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    return _unzip([(row["training_iteration"], row[key]) for row in rows
                   if isinstance(row.get(key), int | float)])


def steps_per_second(rows: list[dict[str, Any]]) -> tuple[list[int], list[float]]:
    """Each iteration's env steps trained per second of its training time.

    Examples:
        >>> steps_per_second([{"training_iteration": 1, STEPS: 2048, TRAIN_TIME: 2.0},
        ...                   {"training_iteration": 2, STEPS: 2048, TRAIN_TIME: 0.5}])
        ([1, 2], [1024.0, 4096.0])
    """
    return _unzip([(row["training_iteration"], row[STEPS] / row[TRAIN_TIME]) for row in rows
                   if isinstance(row.get(STEPS), int | float) and row.get(TRAIN_TIME)])


#: A panel: its title, its y axis and what draws it on an ``Axes``.
Panel = tuple[str, str, Callable[[Any], None]]


def panels(rows: list[dict[str, Any]]) -> list[Panel]:
    """The panels ``rows`` (flattened results) have figures for, in order: losses (each
    module's, in a multi-agent run), evaluation return (and each module's), off-policy
    estimates, throughput.

    Examples:
        >>> rows = [{"training_iteration": 1, "learners/left/total_loss": 0.5,
        ...          "learners/right/total_loss": 0.7, STEPS: 64}]
        >>> [title for title, _, _ in panels(rows)]
        ['losses']
    """
    keys = list(dict.fromkeys(key for row in rows for key in row))
    found: list[Panel] = []
    losses = [key for key in keys if key.startswith(LEARNERS) and key.endswith("_loss")
              and not key.startswith(f"{LEARNERS}{ALL_MODULES}/")]
    # one module's loss terms by their names; a multi-agent run's as module/term
    prefix = LOSSES if all(key.startswith(LOSSES) for key in losses) else LEARNERS
    held_out = [key for key in keys
                if key.startswith(HELD_OUT_LOSSES) and key.endswith("total_loss")]
    if losses or held_out:
        def draw_losses(axes: Any) -> None:
            for key in losses:
                axes.plot(*_series(rows, key), label=key[len(prefix):])
            for key in held_out:
                axes.plot(*_series(rows, key), "--", label="held-out total_loss")
        found.append(("losses", "loss", draw_losses))
    iterations, means = _series(rows, RETURN)
    module_returns = [key for key in keys if key.startswith(MODULE_RETURNS)]
    if means:
        def draw_returns(axes: Any) -> None:
            axes.plot(iterations, means, marker="o", label="mean")
            for key in module_returns:  # a multi-agent run's modules
                axes.plot(*_series(rows, key), "--", marker=".", label=key[len(MODULE_RETURNS):])
            _, stds = _series(rows, RETURN_STD)
            if len(stds) == len(means):
                axes.fill_between(iterations, [m - s for m, s in zip(means, stds)],
                                  [m + s for m, s in zip(means, stds)], alpha=0.2,
                                  label="± std")
        found.append(("evaluation return", "return", draw_returns))
    estimators = [key[len(ESTIMATES):-len("/v_target")] for key in keys
                  if key.startswith(ESTIMATES) and key.endswith("/v_target")]
    if estimators:
        def draw_estimates(axes: Any) -> None:
            for name in estimators:
                x, y = _series(rows, f"{ESTIMATES}{name}/v_target")
                _, std = _series(rows, f"{ESTIMATES}{name}/v_target_std")
                axes.errorbar(x, y, yerr=std if len(std) == len(y) else None, capsize=3,
                              marker="o", label=name)
            axes.plot(*_series(rows, f"{ESTIMATES}{estimators[-1]}/v_behavior"), "k:",
                      label="logged (v_behavior)")
        found.append(("off-policy estimates (± std over episodes)", "discounted return",
                      draw_estimates))
    rates = steps_per_second(rows)
    if rates[1]:
        found.append(("throughput, per iteration", "env steps trained / s",
                      lambda axes: axes.plot(*rates)))
    return found


def plot_learning_curves(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draws the run's curves into one PNG (``<run_dir>/learning_curves.png`` unless ``out``):
    the training loss terms (and the held-out ones, dashed), the evaluation return (± std),
    each off-policy estimate of ``v_target`` with its std as error bars beside ``v_behavior``,
    and each iteration's env steps trained per second. A run without evaluation, say, gets
    no empty panel for it. Returns the file. Needs matplotlib (``pip install
    'offline-rl[plot]'``).

    Examples:
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
    found = panels(rows)
    if not found:
        raise DataFormatError(f"{run_dir / RESULT_FILE} holds no losses, returns, estimates "
                              "or step counts to plot")
    columns = 1 if len(found) == 1 else 2
    figure = Figure(figsize=(5.5 * columns, 3.75 * ((len(found) + 1) // 2)),
                    layout="constrained")
    figure.suptitle(run_dir.name)
    grid = list(figure.subplots((len(found) + 1) // 2, columns, squeeze=False).flat)
    for axes, (title, ylabel, draw) in zip(grid, found):
        draw(axes)
        axes.set_title(title)
        axes.set_xlabel("training iteration")
        axes.set_ylabel(ylabel)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize="small")
    for axes in grid[len(found):]:  # the grid's last cell, when the panels are odd in number
        figure.delaxes(axes)
    out = Path(out) if out is not None else run_dir / "learning_curves.png"
    figure.savefig(out, dpi=100)
    return out
