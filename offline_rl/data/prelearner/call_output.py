"""What a PreLearner's own ``__call__`` may return, as the train columns learners take.

RLlib's custom PreLearners return ``{"batch": MultiAgentBatch({module_id: SampleBatch})}``,
often of torch tensors (``NumpyToTensor``); offline-rl's return flat numpy columns. Both reach
the learners as flat numpy columns: Ray Data carries nothing else across processes. The mapper
hands them to Ray Data as an Arrow table (``arrow_table``).

Examples:
    >>> import numpy as np
    >>> from offline_rl.episodes.sample_batch import MultiAgentBatch
    >>> output = {"batch": MultiAgentBatch({"default_policy": {"rewards": np.ones(2)}}, 2)}
    >>> train_columns(output)
    {'rewards': array([1., 1.])}
    >>> train_columns({"batch": MultiAgentBatch({"a": {}, "b": {}}, 0)})
    Traceback (most recent call last):
    ...
    offline_rl.errors.ConfigError: the PreLearner's __call__ returned a MultiAgentBatch for ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from ray.data.extensions import ArrowTensorArray

from offline_rl.episodes.sample_batch import MultiAgentBatch
from offline_rl.errors import ConfigError
from offline_rl.names import DEFAULT_MODULE_ID
from offline_rl.nested_keys import DELIMITER


def train_columns(output: Mapping[str, Any]) -> Mapping[str, Any]:
    """``output`` as it is when it is flat columns; the module's columns when it is RLlib's
    ``flatten_dict`` of them (``{"<module id>/<column>": ...}``, as ``OfflinePreLearner``
    returns them); the one module's columns, as numpy (torch tensors converted), when it is
    ``{"batch": MultiAgentBatch}``. A ``MultiAgentBatch`` of other modules than
    ``DEFAULT_MODULE_ID`` raises ``ConfigError`` naming them."""
    batch = output.get("batch") if len(output) == 1 else None
    if not isinstance(batch, MultiAgentBatch):
        return _one_module(output)
    modules = sorted(batch.policy_batches)
    if modules != [DEFAULT_MODULE_ID]:
        raise ConfigError(
            f"the PreLearner's __call__ returned a MultiAgentBatch for the modules {modules}; "
            f"offline-rl trains the one module {DEFAULT_MODULE_ID!r} (multi-agent training is "
            "not supported yet): return a MultiAgentBatch of that module only, or its columns")
    return {column: _as_numpy(value)
            for column, value in batch.policy_batches[DEFAULT_MODULE_ID].items()}


def _one_module(output: Mapping[str, Any]) -> Mapping[str, Any]:
    """The columns of flat keys ``"<module id>/<column>"`` of one module, without the module's
    id; ``output`` itself when its keys are not all of one module.

    Examples:
        >>> _one_module({"m/obs": 1, "m/actions": 2})
        {'obs': 1, 'actions': 2}
        >>> _one_module({"obs": 1})
        {'obs': 1}
    """
    modules = {str(key).partition(DELIMITER)[0] if DELIMITER in str(key) else None
               for key in output}
    if len(modules) != 1 or None in modules:
        return output
    return {str(key).partition(DELIMITER)[2]: value for key, value in output.items()}


def _as_numpy(value: Any) -> Any:
    """A torch tensor as a numpy array (without importing torch); anything else unchanged."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    return value


def arrow_table(columns: Mapping[str, Any]) -> pa.Table | Mapping[str, Any]:
    """Numeric and boolean numpy ``columns`` of one length as the Arrow table Ray Data would
    make of them (N-d columns as Ray's tensor columns), built without copying: Ray Data's own
    conversion infers the type of each 1-d column element by element, 25 ms per 8,192 CartPole
    rows, six times the PreLearner's own work. Other columns (strings, objects, torch tensors,
    ragged lengths) are returned as they are, for Ray Data's conversion and its errors.

    Examples:
        >>> table = arrow_table({"obs": np.zeros((2, 3), np.float32), "done": np.ones(2, bool)})
        >>> table.num_rows, str(table.schema.field("done").type)
        (2, 'bool')
        >>> arrow_table({"info": np.array([{}, {}])})["info"].dtype
        dtype('O')
    """
    arrays = list(columns.values())
    if not arrays or not all(isinstance(array, np.ndarray) and array.ndim
                             and array.dtype.kind in "biuf" and len(array) == len(arrays[0])
                             for array in arrays):
        return columns
    return pa.table({name: pa.array(array) if array.ndim == 1
                     else ArrowTensorArray.from_numpy(array)
                     for name, array in columns.items()})


class CallOutputMapper:
    """What Ray Data maps with for a PreLearner class: that class's instance, its outputs as
    ``train_columns`` in an ``arrow_table``. ``mapper_for`` names a subclass as the PreLearner
    class, so Ray Data's stats name the user's class."""

    #: The PreLearner class mapped (set by ``mapper_for``).
    prelearner_class: ClassVar[type]

    def __init__(self, **prelearner_kwargs: Any):
        self.prelearner = self.prelearner_class(**prelearner_kwargs)

    def __call__(self, batch: pa.Table | dict[str, np.ndarray]
                 ) -> pa.Table | Mapping[str, Any]:
        return arrow_table(train_columns(self.prelearner(batch)))


def mapper_for(prelearner_class: type) -> type[CallOutputMapper]:
    """A ``CallOutputMapper`` of ``prelearner_class``, named as it.

    Examples:
        >>> class Upper:
        ...     def __init__(self, **kwargs): pass
        ...     def __call__(self, batch): return {"text": np.char.upper(batch["text"])}
        >>> mapper = mapper_for(Upper)
        >>> mapper.__name__, mapper()({"text": np.array(["a"])})["text"].tolist()
        ('Upper', ['A'])
    """
    return type(prelearner_class.__name__, (CallOutputMapper,),
                {"prelearner_class": prelearner_class, "__doc__": CallOutputMapper.__doc__})
