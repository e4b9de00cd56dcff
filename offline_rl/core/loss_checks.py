"""What a learner checks of the tensors its losses compute with: one value per row where a
loss expects it, and what a loss that became NaN or infinite most often comes from."""

from __future__ import annotations

import torch

from offline_rl.columns import Columns
from offline_rl.errors import TrainingError

#: Batch columns holding one number per row: each reaches the losses with shape ``(batch,)``.
PER_ROW_COLUMNS = (Columns.REWARDS, Columns.TERMINATEDS, Columns.TRUNCATEDS,
                   Columns.ACTION_LOGP, Columns.ACTION_PROB, Columns.VF_PREDS,
                   Columns.ADVANTAGES, Columns.VALUE_TARGETS, Columns.LOSS_MASK, Columns.N_STEP)
#: What a loss that became NaN or infinite most often comes from, for the message.
NONFINITE_CAUSES = (
    "a learning rate too high for the data (lower lr, or set grad_clip); rewards or "
    "observations on a large scale (rescale the rewards; normalize the observations with "
    "config.rl_module(model_config={'normalize_observations': True})); or NaN/inf in "
    "columns the data checks do not cover (extra columns a custom connector reads)")


def check_per_row(loss: str, rows: int, **tensors: torch.Tensor) -> None:
    """Raises ``TrainingError`` unless every tensor holds one value per row (shape
    ``(rows,)``): a loss calls it on the per-row terms it combines, so that one of another
    shape is never broadcast (``(rows, 1) * (rows,)`` is ``(rows, rows)``).

    Examples:
        >>> try:
        ...     check_per_row("policy_loss", 2, logp=torch.zeros(2), weights=torch.ones(2, 1))
        ... except TrainingError as error:
        ...     print(str(error)[:58])
        policy_loss: weights has shape (2, 1), but the loss comput
    """
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != (rows,):
            raise TrainingError(
                f"{loss}: {name} has shape {tuple(tensor.shape)}, but the loss computes with one "
                f"value per row, shape ({rows},); a custom module or loss returned it")
