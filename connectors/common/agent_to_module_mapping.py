"""``AgentToModuleMapping``: a batch's columns keyed by the module that trains on them."""

from __future__ import annotations

from connectors.common.module_keys import is_module_keyed, single_module_id
from connectors.connector_v2 import ConnectorV2


class AgentToModuleMapping(ConnectorV2):
    """RLlib's piece that regroups a batch by module: ``{column: ...}`` becomes ``{module_id:
    {column: ...}}``. Single-agent episodes have one agent, so every row goes to the one
    module of the ``MultiRLModule`` the pipeline runs with (several modules are refused:
    multi-agent training is not supported yet). With any other module (offline-rl's learners
    take flat columns) and on a batch already keyed by module the batch is left as it is.

    Examples:
        >>> import numpy as np
        >>> from offline_rl.models.multi_rl_module import MultiRLModule
        >>> out = AgentToModuleMapping()(rl_module=MultiRLModule({"default_policy": None}),
        ...                              batch={"rewards": np.ones(2)}, episodes=[])
        >>> list(out), list(out["default_policy"])
        (['default_policy'], ['rewards'])
    """

    needs_episodes = False  # reads only the batch

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        module_id = single_module_id(rl_module)
        if module_id is None or is_module_keyed(batch, rl_module):
            return batch
        return {module_id: batch}
