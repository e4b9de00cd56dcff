"""``Learner``: one torch module, its optimizers, and one gradient step per train batch."""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from connectors import NumpyToTensor
from offline_rl.columns import Columns
from offline_rl.core.learner_config import LearnerConfig
from offline_rl.core.loss_checks import NONFINITE_CAUSES, PER_ROW_COLUMNS
from offline_rl.core.optimizer_spec import DEFAULT_OPTIMIZER, OptimizerSpec, learning_rate_key
from offline_rl.core.schedules import learning_rate_at
from offline_rl.core.state_file import load_state_file
from offline_rl.core.tensor_memory import keep_freed_tensor_memory
from offline_rl.errors import ConfigError, ResourceError, TrainingError
from offline_rl.formats.shapes import row_shape
from offline_rl.models.optimizers import adam
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.names import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from offline_rl.settings.learning_rates import is_schedule


def resolve_device(num_gpus_per_learner: float) -> torch.device:
    """``cuda`` when the learner was given a GPU, else ``cpu``; a clear error if CUDA is missing."""
    if not num_gpus_per_learner:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ResourceError(
            f"num_gpus_per_learner={num_gpus_per_learner} but torch sees no CUDA device "
            f"(torch {torch.__version__}). Install a CUDA build of torch (docs/guide/gpus.md: "
            "'Installing a CUDA build of torch') or set config.learners(num_gpus_per_learner=0)."
        )
    return torch.device("cuda", torch.cuda.current_device())


class Learner:
    """Owns an RLModule and its optimizers; ``update(batch)`` is one gradient step.

    Algorithms with one loss subclass it and implement ``compute_loss_for_module``. Those with
    several networks (actor, critics, value function) override ``configure_optimizers`` (one
    Adam per network, each with its own ``lr`` and clipping) and ``compute_losses`` (one loss
    per optimizer: each optimizer steps on the gradient of its own loss only, so an actor loss
    computed through a critic leaves the critic's gradients alone), order the steps in
    ``update_stages`` where one network steps on another's new weights, and update target
    networks in ``after_gradient_based_update``. Batches arrive as flat dicts of numpy columns;
    ``NumpyToTensor`` moves them onto the learner's device. Creating a learner keeps the
    memory of freed CPU tensors in its process for the next update
    (``keep_freed_tensor_memory``).

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import BCConfig
        >>> config = BCConfig().rl_module(model_config={"fcnet_hiddens": [8]})
        >>> spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (2,), np.float32),
        ...                                  gym.spaces.Discrete(2))
        >>> learner = config.get_default_learner_class()(config.learner_config(spec))
        >>> batch = {"obs": np.zeros((4, 2), np.float32), "actions": np.array([0, 1, 0, 1])}
        >>> metrics = learner.update(batch)
        >>> metrics["num_module_steps_trained"], sorted(metrics)[:3]
        (4, ['default_optimizer_learning_rate', 'learner_update_timer', 'num_module_steps_trained'])
    """

    def __init__(self, config: LearnerConfig, module_spec: RLModuleSpec | None = None):
        self.config = config
        keep_freed_tensor_memory()
        module_spec = module_spec or config.module_spec
        self.device = resolve_device(config.learners.num_gpus_per_learner)
        if config.debugging.seed is not None:
            torch.manual_seed(config.debugging.seed)
        self.module = module_spec.build().to(self.device)
        self.optimizer_specs = self.configure_optimizers()
        self.optimizers = {name: adam(spec.parameters, lr=learning_rate_at(spec.lr, 0))
                           for name, spec in self.optimizer_specs.items()}
        self._to_tensor = NumpyToTensor(device=self.device)
        #: The optimizers whose losses ``compute_losses`` is computing now (all of them, but
        #: during a stage of ``update_stages``): it may skip the others' losses.
        self.stepping: tuple[str, ...] = tuple(self.optimizers)
        #: Optimizer steps taken (a restored algorithm sets its saved count): losses with
        #: schedules (delayed policy updates, a behavior-cloning warm-up) read it.
        self.num_updates = 0

    def configure_optimizers(self) -> dict[str, OptimizerSpec]:
        """The optimizers by name; by default one, ``"default"``, over the whole module."""
        return {DEFAULT_OPTIMIZER: OptimizerSpec(list(self.module.parameters()),
                                                 self.config.training.lr)}

    def compute_losses(self, *, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
                       ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Each optimizer's loss, by name (at least those ``stepping`` now), and named scalar
        tensors to report. By default the one optimizer's loss is
        ``compute_loss_for_module``'s."""
        loss, stats = self.compute_loss_for_module(module_id=DEFAULT_MODULE_ID, batch=batch,
                                                   fwd_out=fwd_out)
        return {DEFAULT_OPTIMIZER: loss}, stats

    def compute_loss_for_module(
        self, *, module_id: str, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Returns the loss to minimize and named scalar tensors to report (learners with one
        optimizer implement this; learners with several, ``compute_losses``)."""
        raise ConfigError(f"{type(self).__name__} defines no loss: implement "
                          "compute_loss_for_module (one optimizer) or compute_losses (several)")

    def after_gradient_based_update(self) -> None:
        """Runs after every optimizer step (target-network updates go here)."""

    def update_stages(self) -> list[tuple[str, ...]]:
        """The optimizers in the order they step, in groups: each group steps on losses
        computed after the previous groups' steps (so an actor's loss can go through a critic
        that has just stepped, as TD3+BC's does). By default one group: every optimizer
        steps on the same forward pass."""
        return [tuple(self.optimizers)]

    def update(self, batch: dict[str, np.ndarray] | None) -> dict[str, float] | None:
        """One gradient step on ``batch``; returns the step's metrics as floats.

        Each of ``update_stages`` runs a forward pass and steps its optimizers on their losses;
        ``total_loss`` sums the losses stepped on, and each other metric is reported as the
        first stage that computed it. In a ``torch.distributed`` process group (remote
        learners) the gradients are averaged over the learners that had a batch; a learner
        without one (``None``) still takes part, so all take the same step. Returns ``None``
        when no learner had a batch (no step)."""
        started = time.perf_counter()
        tensors = None if batch is None else self._to_tensor(rl_module=self.module, batch=batch,
                                                             episodes=[])
        if tensors is not None:
            self._check_batch_shapes(tensors)
        stepped: list[torch.Tensor] = []
        reported: dict[str, torch.Tensor] = {}
        stages = self.update_stages()
        for stage in stages:
            for name in stage:
                self.optimizers[name].zero_grad(set_to_none=True)
            if tensors is not None:
                losses, stats = self._losses(tensors, stage)
                losses = self._stage_losses(stage, losses)
                self._backward(losses)
                stepped.extend(loss.detach() for loss in losses.values())
                for key, value in stats.items():
                    reported.setdefault(key, value.detach())
            if dist.is_initialized():
                if not self._average_gradients(stage, has_batch=batch is not None):
                    return None
            elif batch is None:
                return None
            reported.update(self._clip_gradients(stage))
            self._schedule_learning_rates(stage)
            for name in stage:
                self.optimizers[name].step()
        self.after_gradient_based_update()
        self.num_updates += 1
        if batch is None:
            return {}
        reported["total_loss"] = torch.stack(stepped).sum()
        values = torch.stack(list(reported.values())).tolist()
        metrics = dict(zip(reported, values))
        metrics.update(self._next_learning_rates([name for stage in stages for name in stage]))
        if not math.isfinite(metrics["total_loss"]):
            raise self._nonfinite_error(metrics)
        metrics["num_module_steps_trained"] = len(next(iter(batch.values())))
        metrics["learner_update_timer"] = time.perf_counter() - started
        return metrics

    def _check_batch_shapes(self, tensors: dict[str, torch.Tensor]) -> None:
        """Raises ``TrainingError`` unless the batch's actions have the action space's per-row
        shape and its per-row columns (``PER_ROW_COLUMNS``) one value per row."""
        rows = len(next(iter(tensors.values())))
        expected = {name: () for name in PER_ROW_COLUMNS}
        expected[Columns.ACTIONS] = row_shape(getattr(self.module, "action_space", None))
        for name, shape in expected.items():
            tensor = tensors.get(name)
            if tensor is None or shape is None or tuple(tensor.shape) == (rows, *shape):
                continue
            raise TrainingError(
                f"update {self.num_updates + 1}: batch column {name!r} has shape "
                f"{tuple(tensor.shape)}, but the losses expect {(rows, *shape)} (one row per "
                "timestep, each of the action space's shape or one number); nothing is "
                "broadcast. A custom PreLearner, connector piece or batch produced it: return "
                "that shape")

    def _nonfinite_error(self, metrics: dict[str, float]) -> TrainingError:
        """The error for an update whose loss became NaN or infinite, naming the losses."""
        losses = [name for name, value in metrics.items()
                  if name.endswith("loss") and name != "total_loss" and not math.isfinite(value)]
        shown = ", ".join(f"{name}={metrics[name]}" for name in losses or ["total_loss"])
        return TrainingError(
            f"update {self.num_updates}: the loss became NaN or infinite ({shown}); training "
            "stopped, as the weights are no longer usable (restore the last checkpoint). Likely "
            f"causes: {NONFINITE_CAUSES}")

    def _nonfinite_outputs(self, fwd_out: dict[str, torch.Tensor]) -> list[str]:
        """The forward outputs holding NaN or inf (one check each, on an error's path only)."""
        return [name for name, value in fwd_out.items() if isinstance(value, torch.Tensor)
                and value.is_floating_point() and not bool(torch.isfinite(value).all())]

    def _stage_losses(self, stage: tuple[str, ...], losses: dict[str, torch.Tensor]
                      ) -> dict[str, torch.Tensor]:
        missing = [name for name in stage if name not in losses]
        if missing:
            raise ConfigError(
                f"{type(self).__name__}.compute_losses gave no loss for the optimizers "
                f"{missing} that update_stages steps now: return their losses, or leave them "
                "out of update_stages on this step")
        return {name: losses[name] for name in stage}

    def _losses(self, tensors: dict[str, torch.Tensor], stepping: tuple[str, ...]
                ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        self.stepping = stepping
        fwd_out = self.module.forward_train(tensors)
        try:
            return self.compute_losses(batch=tensors, fwd_out=fwd_out)
        except ValueError as error:  # torch's distributions refuse NaN parameters
            nonfinite = self._nonfinite_outputs(fwd_out)
            if not nonfinite:
                raise
            raise TrainingError(
                f"update {self.num_updates + 1}: the module's outputs {nonfinite} hold NaN or "
                "inf, so no loss can be computed; training stopped, as the weights are no "
                f"longer usable (restore the last checkpoint). Likely causes: {NONFINITE_CAUSES}"
            ) from error
        finally:
            self.stepping = tuple(self.optimizers)

    def loss_metrics(self, batches: list[dict[str, np.ndarray]],
                     loss_fn: Callable[..., Any] | None = None) -> dict[str, float]:
        """What ``update`` reports of its losses (``total_loss`` and the loss's stats), on
        ``batches`` without a step, averaged weighted by their rows; the learner is left as it
        was (losses that update running statistics, such as MARWIL's, are undone).
        ``loss_fn(batch=..., fwd_out=...)``, when given, replaces the learner's losses: it
        returns the loss, or the loss and stats to report."""
        saved = copy.deepcopy(self.get_state())
        totals: dict[str, float] = {}
        rows = 0
        try:
            with torch.no_grad():
                for batch in batches:
                    tensors = self._to_tensor(rl_module=self.module, batch=batch, episodes=[])
                    self._check_batch_shapes(tensors)
                    if loss_fn is None:
                        losses, stats = self._losses(tensors, tuple(self.optimizers))
                    else:
                        loss = loss_fn(batch=tensors, fwd_out=self.module.forward_train(tensors))
                        loss, stats = loss if isinstance(loss, tuple) else (loss, {})
                        losses = {"loss_fn": torch.as_tensor(loss)}
                    count = len(batch[Columns.ACTIONS])
                    for key, value in {"total_loss": torch.stack(list(losses.values())).sum(),
                                       **stats}.items():
                        totals[key] = totals.get(key, 0.0) + float(value) * count
                    rows += count
        finally:
            self.set_state(saved)
        return {key: total / max(rows, 1) for key, total in totals.items()}

    def _backward(self, losses: dict[str, torch.Tensor]) -> None:
        """Sets each optimizer's parameters' gradients to those of its own loss (an optimizer
        without a loss this step has none, and does not step)."""
        if len(self.optimizers) == 1:
            next(iter(losses.values())).backward()
            return
        for name, loss in losses.items():
            parameters = self.optimizer_specs[name].parameters
            grads = torch.autograd.grad(loss, parameters, retain_graph=True, allow_unused=True)
            for parameter, grad in zip(parameters, grads):
                parameter.grad = grad

    def _average_gradients(self, stage: tuple[str, ...], *, has_batch: bool) -> bool:
        """All-reduces the gradients of the ``stage``'s optimizers (one flat buffer) and the
        count of learners with a batch; divides by that count. False when no learner had a
        batch."""
        parameters = [p for name in stage for p in self.optimizer_specs[name].parameters
                      if p.requires_grad]
        grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in parameters]
        flat = torch.cat([g.reshape(-1) for g in grads]
                         + [torch.ones(1, device=self.device) * has_batch])
        dist.all_reduce(flat)
        contributors = flat[-1].item()
        if not contributors:
            return False
        flat /= contributors
        offset = 0
        for parameter, grad in zip(parameters, grads):
            parameter.grad = flat[offset:offset + grad.numel()].view_as(grad)
            offset += grad.numel()
        return True

    def rows_trained(self, updates: int) -> int:
        """The rows trained on, over all learners, after ``updates`` updates: the timestep of
        the learning-rate schedules, and of anything else counted in rows trained."""
        return (updates * self.config.training.train_batch_size_per_learner
                * max(self.config.learners.num_learners, 1))

    def _schedule_learning_rates(self, stage: tuple[str, ...]) -> None:
        """Sets the learning rate of each scheduled optimizer of the ``stage`` for this step
        (the timestep is the rows trained on before it, over all learners)."""
        timestep = self.rows_trained(self.num_updates)
        for name in stage:
            spec = self.optimizer_specs[name]
            if is_schedule(spec.lr):
                rate = learning_rate_at(spec.lr, timestep)
                for group in self.optimizers[name].param_groups:
                    group["lr"] = rate

    def _next_learning_rates(self, names: list[str]) -> dict[str, float]:
        """The learning rate each of the optimizers ``names`` takes for the next step (at the
        rows trained on so far), as RLlib reports it after an update:
        ``default_optimizer_learning_rate`` for the one default optimizer, else
        ``<optimizer>_learning_rate``."""
        timestep = self.rows_trained(self.num_updates)
        return {learning_rate_key(name): learning_rate_at(self.optimizer_specs[name].lr, timestep)
                for name in dict.fromkeys(names)}

    def _clip_gradients(self, stage: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """Clips the gradients of each optimizer of the ``stage`` (``grad_clip_by``); returns
        their norms before clipping, as ``gradients_global_norm`` (one optimizer) or
        ``<name>_gradients_...``."""
        norms = {}
        for name in stage:
            spec = self.optimizer_specs[name]
            clip = self.config.training.grad_clip if spec.grad_clip is None else spec.grad_clip
            if clip is None:
                continue
            parameters = [p for p in spec.parameters if p.grad is not None]
            norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
            if self.config.training.grad_clip_by == "global_norm":
                torch.nn.utils.clip_grad_norm_(parameters, clip)
            elif self.config.training.grad_clip_by == "norm":
                for parameter in parameters:
                    torch.nn.utils.clip_grad_norm_([parameter], clip)
            else:
                torch.nn.utils.clip_grad_value_(parameters, clip)
            prefix = "" if name == DEFAULT_OPTIMIZER else f"{name}_"
            norms[f"{prefix}gradients_global_norm"] = norm.detach()
        return norms

    def get_state(self, components: str | list[str] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
        """Module weights (target networks included) and each optimizer's state.

        With ``components`` (or RLlib's ``component=``) naming ``COMPONENT_RL_MODULE``, RLlib's
        form of the module's state instead, as RLlib's scripts read it:
        ``{"rl_module": {module_id: weights}}``."""
        wanted = components if components is not None else kwargs.get("component")
        if wanted is not None:
            names = [wanted] if isinstance(wanted, str) else list(wanted)
            unknown = sorted(set(names) - {COMPONENT_RL_MODULE})
            if unknown:
                raise ConfigError(f"Learner.get_state: unknown component(s) {unknown}; the "
                                  f"learner's component is {COMPONENT_RL_MODULE!r}")
            return {COMPONENT_RL_MODULE: {DEFAULT_MODULE_ID: self.module.state_dict()}}
        return self.training_state()

    def training_state(self) -> dict[str, Any]:
        """What ``get_state()`` returns and ``set_state`` restores: the module's weights and
        each optimizer's state (a learner with more state, e.g. a temperature, adds it)."""
        return {"module": self.module.state_dict(),
                "optimizers": {name: optimizer.state_dict()
                               for name, optimizer in self.optimizers.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores what ``get_state`` returned (the optimizers' state only when given); a
        module state of another shape is a ``ConfigError``."""
        try:
            self.module.load_state_dict(state["module"])
        except RuntimeError as error:  # torch: tensors of other names or shapes
            first_line = str(error).strip().splitlines()[0]
            raise ConfigError(
                f"the saved module does not fit the module this config builds ({first_line}). "
                "Build with the config it was saved with: Algorithm.from_checkpoint(path) reads "
                "it") from None
        saved = state.get("optimizers", {})
        if saved and set(saved) != set(self.optimizers):
            raise ConfigError(f"the saved optimizers {sorted(saved)} are not this learner's "
                              f"{sorted(self.optimizers)}; load the checkpoint with the "
                              "algorithm it was saved with")
        for name, optimizer_state in saved.items():
            self.optimizers[name].load_state_dict(optimizer_state)

    def save_state(self, path: str | Path) -> None:
        """Writes the state to ``path`` (a torch file)."""
        torch.save(self.get_state(), path)

    def load_state(self, path: str | Path) -> None:
        """Reads a state written by ``save_state`` (tensors only: nothing in it is executed)."""
        self.set_state(load_state_file(path, self.device))
