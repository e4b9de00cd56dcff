"""What an operator watches: each training result appended to a run folder (JSON lines, CSV,
TensorBoard) and learning curves drawn from it."""

from offline_rl.monitoring.learning_curves import plot_learning_curves
from offline_rl.monitoring.result_log import ResultLog, flatten

__all__ = ["ResultLog", "flatten", "plot_learning_curves"]
