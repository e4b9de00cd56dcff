"""A config's off-policy estimators, run on its held-out data at each evaluation."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from offline_rl.data.pipeline.logged_data import read_logged_data
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.evaluation.off_policy import (
    DirectMethod,
    DoublyRobust,
    ImportanceSampling,
    OffPolicyEstimator,
    TrajectoryImportanceSampling,
    WeightedImportanceSampling,
    logged_episodes,
)
from offline_rl.import_path import import_object

#: The estimators a config may name by their class name.
ESTIMATORS = {estimator.__name__: estimator for estimator in (
    ImportanceSampling, TrajectoryImportanceSampling, WeightedImportanceSampling, DirectMethod,
    DoublyRobust)}


def estimator_class(name: str, kind: Any) -> type[OffPolicyEstimator]:
    """The estimator class ``kind`` names (a class, a name in ``ESTIMATORS`` or an import
    path); ``ConfigError`` otherwise."""
    if isinstance(kind, str):
        kind = ESTIMATORS.get(kind) or (import_object(kind) if ":" in kind else kind)
    if not (isinstance(kind, type) and issubclass(kind, OffPolicyEstimator)):
        raise ConfigError(f"off_policy_estimation_methods[{name!r}] type {kind!r} is no "
                          f"estimator; use one of {sorted(ESTIMATORS)} or a subclass of "
                          "OffPolicyEstimator")
    return kind


class OffPolicyEvaluation:
    """Reads ``config.evaluation_config``'s data (``offline_data`` settings over the config's
    own) once, through Ray Data; ``estimate(module)`` then runs each of
    ``config.off_policy_estimation_methods`` on it: ``train`` (fitting its model for the
    current policy, if it has one) and ``estimate``. A method is ``{"type": ..., **args}``:
    ``type`` one of ``ESTIMATORS`` (a class or its name) or a ``"package.module:Name"``
    subclass of ``OffPolicyEstimator``; the arguments are its constructor's (``gamma``
    defaults to the algorithm's, else 0.99; ``epsilon_greedy``; ``q_model_config``), checked
    here, as the algorithm is built: ``ConfigError`` names the method and the argument."""

    def __init__(self, config: Any, spaces: tuple[gym.Space, gym.Space]):
        self.methods: dict[str, tuple[type[OffPolicyEstimator], dict[str, Any]]] = {}
        evaluation = config.sections.evaluation
        for name, spec in evaluation.off_policy_estimation_methods.items():
            kind = estimator_class(name, spec["type"])
            arguments = {"gamma": getattr(config.sections.hyperparameters, "gamma", 0.99),
                         **{key: value for key, value in spec.items() if key != "type"}}
            accepted = list(inspect.signature(kind).parameters)[1:]
            unknown = sorted(set(arguments) - set(accepted))
            where = f"off_policy_estimation_methods[{name!r}]: {kind.__name__}"
            if unknown:
                raise ConfigError(f"{where} takes no {unknown}; it takes {accepted}")
            try:
                kind.check_arguments(arguments)
            except ConfigError as error:
                raise ConfigError(f"{where}: {error}") from None
            self.methods[name] = kind, arguments
        held_out = config.copy().offline_data(**evaluation.evaluation_config)
        try:
            self.episodes = logged_episodes(read_logged_data(held_out.data_config(spaces),
                                                             spaces))
        except DataFormatError as error:
            raise DataFormatError(f"evaluation_config input_ "
                                  f"{held_out.sections.offline_data.input_!r}: {error}"
                                  ) from None

    def estimate(self, module: Any) -> dict[str, Mapping[str, float]]:
        """``{name: the estimate, plus its model's training metrics}`` for ``module``'s
        policy."""
        results = {}
        for name, (kind, arguments) in self.methods.items():
            estimator = kind(module, **arguments)
            metrics = estimator.train(self.episodes)
            results[name] = {**estimator.estimate(self.episodes), **metrics}
        return results
