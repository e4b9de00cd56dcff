"""``OfflineEvaluationRunner``: RLlib 2.60's runner of the learner's loss on offline data, built
from a config alone and fed a Ray Data iterator of mapped rows (``OfflineData.sample(
return_iterator=True)``). The loss is ``Learner.loss_metrics``, as the algorithm's held-out
losses compute it (``HeldOutLosses``)."""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import ray.data
import torch

from offline_rl.columns import Columns
from offline_rl.data.prelearner.module_weights import WEIGHTS_VERSION
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.models.multi_rl_module import MultiRLModule, MultiRLModuleSpec, module_spec_of
from offline_rl.names import (
    ALL_MODULES,
    COMPONENT_RL_MODULE,
    DEFAULT_MODULE_ID,
    TOTAL_EVAL_LOSS_KEY,
)

#: A batch as the dataset iterator gives it: numpy columns, or an Arrow table.
Batch = dict[str, np.ndarray] | pa.Table


class OfflineEvaluationRunner:
    """Computes the loss of the config's learner on batches of
    ``offline_eval_batch_size_per_runner`` rows from its dataset iterator, without a step.

    ``module`` (a ``MultiRLModule``) is built from the config's spaces (or ``module_spec``);
    ``set_state`` loads the trained weights into it (``Learner.get_state(component=
    COMPONENT_RL_MODULE)``'s form). ``run()`` evaluates ``dataset_num_iters_per_offline_eval_
    runner`` batches (``None``: up to the end of the iterator's data), or ``num_samples`` rows,
    continuing where the last ``run()`` stopped, and starting the data over at its end.

    Examples:
        >>> import gymnasium as gym
        >>> from offline_rl import BCConfig, OfflineData
        >>> config = (BCConfig().environment("CartPole-v1")
        ...           .offline_data(input_=str(cartpole_data))
        ...           .evaluation(offline_eval_batch_size_per_runner=100))
        >>> runner, data = OfflineEvaluationRunner(config=config), OfflineData(config)
        >>> runner.set_dataset_iterator(
        ...     iterator=data.sample(return_iterator=True, num_shards=0)[0])
        >>> metrics = runner.run()
        >>> runner.stop(), data.stop()
        (None, None)
        >>> metrics["default_policy"]["total_eval_loss"] > 0
        True
        >>> metrics["__all_modules__"]["num_env_steps_sampled"]
        100
    """

    #: The ``iter_batches`` format of the batches ``run()`` evaluates.
    BATCH_FORMAT = "numpy"

    def __init__(self, config: Any, module_spec: MultiRLModuleSpec | None = None):
        config.validate()
        self.config = config
        spec = (module_spec_of(module_spec, DEFAULT_MODULE_ID)
                or config.get_rl_module_spec(*config.input_spaces()))
        learner_config = config.learner_config(spec)
        learner_config = dataclasses.replace(learner_config, learners=dataclasses.replace(
            learner_config.learners, num_gpus_per_learner=0))  # the runners evaluate on CPU
        self._learner = config.get_default_learner_class()(learner_config)
        self.module = MultiRLModule({DEFAULT_MODULE_ID: self._learner.module})
        custom = config.sections.evaluation.offline_loss_for_module_fn
        self._loss_for_module_fn = (types.MethodType(custom, self) if custom is not None
                                    else self.learner_loss)
        self._dataset_iterator: ray.data.DataIterator | None = None
        self._batch_iterator: Iterator[Batch | None] | None = None
        self._lifetime = {"rows": 0, "batches": 0}

    def learner_loss(self, *, module_id: str, config: Any, batch: dict[str, torch.Tensor],
                     fwd_out: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """The default ``_loss_for_module_fn``: the sum of the learner's losses and its stats
        (RLlib's default, ``Learner.compute_loss_for_module``, in offline-rl's form)."""
        losses, stats = self._learner.compute_losses(batch=batch, fwd_out=fwd_out)
        return torch.stack(list(losses.values())).sum(), stats

    def set_dataset_iterator(self, iterator: ray.data.DataIterator) -> None:
        """The mapped rows ``run()`` evaluates (``OfflineData.sample(return_iterator=True)``'s
        iterators, or a ``streaming_split`` shard)."""
        self.stop()
        self._dataset_iterator = iterator

    def stop(self) -> None:
        """Ends the pass over the iterator that ``run()`` left open."""
        if self._batch_iterator is not None:
            self._batch_iterator.close()
        self._batch_iterator = None

    def get_state(self) -> dict[str, Any]:
        """``{COMPONENT_RL_MODULE: {module_id: weights}}``."""
        return {COMPONENT_RL_MODULE: self.module.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Loads the module weights of ``state`` (``get_state``'s form, as the learner's
        ``get_state(component=COMPONENT_RL_MODULE)`` returns it)."""
        weights = state.get(COMPONENT_RL_MODULE, {})
        if set(weights) != {DEFAULT_MODULE_ID}:
            raise ConfigError(f"OfflineEvaluationRunner.set_state takes {{{COMPONENT_RL_MODULE!r}: "
                              f"{{{DEFAULT_MODULE_ID!r}: weights}}}}; got the keys {sorted(state)}"
                              f" with modules {sorted(weights)}")
        self._learner.set_state({"module": weights[DEFAULT_MODULE_ID]})

    def run(self, *, num_samples: int | None = None, explore: bool = False,
            train: bool = True) -> dict[str, dict[str, float]]:
        """The loss metrics per module (``TOTAL_EVAL_LOSS_KEY`` and the loss's stats) and the
        rows and batches evaluated, now and in the runner's lifetime (under ``ALL_MODULES``)."""
        self._check_iterator()
        if explore or not train:
            raise ConfigError("OfflineEvaluationRunner.run: the loss is computed from the "
                              "module's forward_train outputs; call run(explore=False, "
                              "train=True)")
        batches = [batch for batch in self._next_batches(num_samples) if batch is not None]
        loss_fn = functools.partial(self._loss_for_module_fn, module_id=DEFAULT_MODULE_ID,
                                    config=self.config)
        metrics = self._learner.loss_metrics(batches, loss_fn=loss_fn)
        rows = sum(len(batch[Columns.ACTIONS]) for batch in batches)
        counts = self._counts(rows, len(batches))
        counts[DEFAULT_MODULE_ID] = {TOTAL_EVAL_LOSS_KEY: metrics.pop("total_loss"), **metrics,
                                     **counts[DEFAULT_MODULE_ID]}
        return counts

    def _check_iterator(self) -> None:
        if self._dataset_iterator is None:
            raise ConfigError(f"{type(self).__name__}.run: no dataset iterator; call "
                              "set_dataset_iterator(iterator=...) first, e.g. with "
                              "algo.offline_eval_runner_group._offline_data_iterators[0]")

    def _counts(self, rows: int, batches: int) -> dict[str, dict[str, float]]:
        """RLlib's counts of a ``run()`` that evaluated ``rows`` rows in ``batches`` batches,
        and the runner's lifetime sums."""
        self._lifetime["rows"] += rows
        self._lifetime["batches"] += batches
        steps = {"num_module_steps_sampled": rows,
                 "num_module_steps_sampled_lifetime": self._lifetime["rows"]}
        return {
            DEFAULT_MODULE_ID: {"module_sample_batch_size_mean": rows / max(batches, 1),
                                **steps},
            ALL_MODULES: {"num_env_steps_sampled": rows,
                          "num_env_steps_sampled_lifetime": self._lifetime["rows"], **steps,
                          "dataset_num_iters_evaluated": batches,
                          "dataset_num_iters_evaluated_lifetime": self._lifetime["batches"]},
        }

    def _next_batches(self, num_samples: int | None) -> Iterator[Batch | None]:
        """``num_samples`` rows, else ``dataset_num_iters_per_offline_eval_runner`` batches
        (``None``: up to the end of the data), from where the last call stopped; ``None``
        where a pass over the data ends."""
        evaluation = self.config.sections.evaluation
        if self._batch_iterator is None:
            self._batch_iterator = self._epochs(evaluation.offline_eval_batch_size_per_runner)
        num_iters = evaluation.dataset_num_iters_per_offline_eval_runner
        taken = rows = 0
        while (rows < num_samples if num_samples is not None
               else num_iters is None or taken < num_iters):
            batch = next(self._batch_iterator)
            if batch is None:  # the end of the data
                yield None
                if num_samples is None and num_iters is None and taken:
                    break
                continue
            if num_samples is not None:
                batch = _head(batch, num_samples - rows)
            taken += 1
            rows += _num_rows(batch)
            yield batch

    def _epochs(self, batch_size: int) -> Iterator[Batch | None]:
        """The iterator's batches (in ``BATCH_FORMAT``), pass after pass, ``None`` after each
        pass."""
        while True:
            empty = True
            for batch in self._dataset_iterator.iter_batches(batch_size=batch_size,
                                                             batch_format=self.BATCH_FORMAT):
                empty = False
                yield (batch if isinstance(batch, pa.Table)
                       else {key: value for key, value in batch.items() if key != WEIGHTS_VERSION})
            if empty:
                raise DataFormatError(f"{type(self).__name__}.run: the dataset iterator holds "
                                      "no rows to evaluate (an empty input, or a shard of fewer "
                                      "rows than the other shards' batches)")
            yield None


def _num_rows(batch: Batch) -> int:
    return batch.num_rows if isinstance(batch, pa.Table) else len(next(iter(batch.values())))


def _head(batch: Batch, rows: int) -> Batch:
    if isinstance(batch, pa.Table):
        return batch.slice(0, rows)
    return {key: value[:rows] for key, value in batch.items()}
