"""The ``training`` section: optimizer and batch settings every algorithm shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from offline_rl.settings.learning_rates import LearningRate, learning_rate_problem
from offline_rl.settings.options import (
    A_BOOL,
    A_NUMBER_ABOVE_0,
    Rule,
    Section,
    is_int_at_least,
    one_of,
    option,
    optional,
)

#: Largest ``train_batch_size_per_learner`` (rows): past it one batch's columns alone take tens
#: of GB. Raise it here for a learner that can hold more.
MAX_TRAIN_BATCH_SIZE = 2**24


@dataclass
class TrainingConfig(Section):
    """See ``AlgorithmConfig.training``.

    Examples:
        >>> TrainingConfig(train_batch_size_per_learner=0).problems()[0][1][:41]
        'must be an int from 1 to 16,777,216 (sett'
    """

    #: The learning rate: a number or a schedule ``[[timestep, lr], ...]`` (``learning_rates``).
    lr: LearningRate = option(1e-3, learning_rate_problem)
    #: Rows per train batch of each learner.
    train_batch_size_per_learner: int = option(1024, Rule(
        f"an int from 1 to {MAX_TRAIN_BATCH_SIZE:,} (settings.training.MAX_TRAIN_BATCH_SIZE)",
        lambda value: is_int_at_least(value, 1) and value <= MAX_TRAIN_BATCH_SIZE))
    #: Gradients are clipped to this (``None``: not clipped) ...
    grad_clip: float | None = option(None, optional(A_NUMBER_ABOVE_0))
    #: ... by ``"value"``, each tensor's ``"norm"`` or the ``"global_norm"``.
    grad_clip_by: str = option("global_norm", one_of("value", "norm", "global_norm"))
    #: ``(obs_space, act_space) -> connector piece(s)`` placed before the default learner
    #: pieces, or its ``"package.module:name"``.
    learner_connector: Callable[..., Any] | str | None = option(None)
    #: Whether the default learner connector pieces follow the custom ones.
    add_default_connectors_to_learner_pipeline: bool = option(True, A_BOOL)
    #: With ``"sampler"`` in ``input_``: online rows trained per env step sampled (RLlib's
    #: ``training_intensity``); ``None``: 1, each env step trained on about once.
    training_intensity: float | None = option(None, optional(A_NUMBER_ABOVE_0))
