"""What a ``train()`` result says of the learners and the data stream, from each learner's
figures."""

from __future__ import annotations

from typing import Any

import numpy as np

from offline_rl.data.prelearner.data_ledger import DROP_REASONS
from offline_rl.names import ALL_MODULES, DEFAULT_MODULE_ID

#: Each learner's figures reported under ``result["learners"]["per_learner"]``.
PER_LEARNER_KEYS = ("num_updates", "num_updates_planned", "num_optimizer_steps",
                    "num_module_steps_trained", "num_online_rows_trained", "epochs_this_iter")


def mean_learner_metrics(per_learner: list[dict[str, Any]]) -> dict[str, float]:
    """Each loss metric averaged over the learners that reported it."""
    names = {name for learner in per_learner for name in learner["metrics"]}
    return {name: float(np.mean([learner["metrics"][name] for learner in per_learner
                                 if name in learner["metrics"]])) for name in sorted(names)}


def learner_results(per_learner: list[dict[str, Any]], *, lifetime_steps: int,
                    train_time_s: float, num_updates_lifetime: int) -> dict[str, Any]:
    """RLlib's ``result["learners"]``: the module's loss metrics averaged over the learners
    (``"default_policy"``), the step counts of all (``"__all_modules__"``) and each learner's
    planned and done updates (``"per_learner"``)."""
    steps = sum(learner["num_module_steps_trained"] for learner in per_learner)
    return {
        DEFAULT_MODULE_ID: {**mean_learner_metrics(per_learner),
                            "num_module_steps_trained": steps},
        ALL_MODULES: {
            "num_env_steps_trained": steps,
            "num_env_steps_trained_lifetime": lifetime_steps,
            "num_env_steps_trained_lifetime_throughput": lifetime_steps / train_time_s,
            "num_updates": per_learner[0]["num_optimizer_steps"],
            "num_updates_lifetime": num_updates_lifetime,
            "num_learners": len(per_learner),
        },
        "per_learner": [{key: learner[key] for key in PER_LEARNER_KEYS}
                        for learner in per_learner],
    }


def data_figures(per_learner: list[dict[str, Any]], counts: dict[str, int]) -> dict[str, Any]:
    """The data stream's figures: totals over the learners' shards, each learner's, data
    dropped by reason, ``Box`` actions outside the action space (kept or clipped) and the
    episodes that never end (kept; ``None`` until a whole epoch has been read, as an
    episode's end may lie in rows not read yet)."""
    rows = [learner["rows_per_epoch"] for learner in per_learner]
    staleness = [value for learner in per_learner for value in learner["staleness"]]
    epochs = min(learner["epochs_completed"] for learner in per_learner)
    figures: dict[str, Any] = {
        "epochs_completed": epochs,
        "rows_per_epoch": None if None in rows else sum(rows),
        "wait_s": max(learner["wait_s"] for learner in per_learner),
        "first_batch_wait_s": max((learner["first_batch_wait_s"] or 0.0)
                                  for learner in per_learner),
        "dropped": {reason: count for reason, count in counts.items() if reason in DROP_REASONS},
        "actions_out_of_bounds": counts.get("actions_out_of_bounds", 0),
        "unfinished_episodes": counts.get("unfinished_episodes", 0) if epochs else None,
        "per_learner": [{key: learner[key] for key in ("epochs_completed", "rows_per_epoch",
                                                        "wait_s", "first_batch_wait_s")}
                        for learner in per_learner],
    }
    if per_learner[0].get("source_rows"):  # rows of each mixed source this iteration
        figures["sources"] = {name: sum(learner["source_rows"][name] for learner in per_learner)
                              for name in per_learner[0]["source_rows"]}
    if staleness:
        figures["module_weights_staleness"] = {"mean": float(np.mean(staleness)),
                                               "max": float(np.max(staleness))}
    return figures


#: Each learner's figures that add up over an iteration's rounds of updates.
ADDITIVE_KEYS = ("num_module_steps_trained", "num_online_rows_trained", "num_updates",
                 "num_optimizer_steps", "epochs_this_iter", "wait_s")


def merged_rounds(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each learner's figures over the rounds of updates of one iteration (RLlib's
    ``training_step`` calls; ``reporting(min_time_s_per_iteration=...)`` runs several): counts,
    planned updates and waits summed, loss metrics averaged weighted by updates, staleness and
    mixed sources' rows over all rounds, the stream's state (epochs, rows) as it ends."""
    if len(rounds) == 1:
        return rounds[0]
    merged = []
    for learner_rounds in zip(*rounds, strict=True):
        last = dict(learner_rounds[-1])
        for key in ADDITIVE_KEYS:
            last[key] = sum(learner[key] for learner in learner_rounds)
        planned = [learner["num_updates_planned"] for learner in learner_rounds]
        last["num_updates_planned"] = None if None in planned else sum(planned)
        weights = [(learner["num_updates"], learner["metrics"]) for learner in learner_rounds
                   if learner["num_updates"]]
        names = {name for _, metrics in weights for name in metrics}
        last["metrics"] = {name: float(np.average(
            [metrics[name] for _, metrics in weights if name in metrics],
            weights=[count for count, metrics in weights if name in metrics]))
            for name in sorted(names)}
        last["staleness"] = [value for learner in learner_rounds for value in learner["staleness"]]
        last["source_rows"] = {name: sum(learner["source_rows"].get(name, 0)
                                         for learner in learner_rounds)
                               for name in last["source_rows"]}
        merged.append(last)
    return merged
