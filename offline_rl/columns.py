"""Column names shared by datasets, episodes, connectors and learners (RLlib's ``Columns``),
and the one way rows are taken from a batch of columns."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np


class Columns:
    """Names of the data columns, identical to RLlib's ``Columns`` so configs port unchanged.

    Examples:
        >>> from offline_rl import Columns
        >>> Columns.NEXT_OBS
        'new_obs'
    """

    OBS = "obs"
    NEXT_OBS = "new_obs"
    INFOS = "infos"
    ACTIONS = "actions"
    ACTIONS_FOR_ENV = "actions_for_env"
    REWARDS = "rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    EPS_ID = "eps_id"
    AGENT_ID = "agent_id"
    MODULE_ID = "module_id"
    T = "t"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    ACTION_PROB = "action_prob"
    ACTION_LOGP = "action_logp"
    VF_PREDS = "vf_preds"
    VALUES_BOOTSTRAPPED = "values_bootstrapped"
    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"
    STATE_IN = "state_in"
    STATE_OUT = "state_out"
    LOSS_MASK = "loss_mask"
    #: Steps an n-step transition spans (its reward is discounted over them).
    N_STEP = "n_step"
    EMBEDDINGS = "embeddings"


#: Default read schema: each episode field (key) is read from the data column of the same name
#: (value). ``config.offline_data(input_read_schema=...)`` overrides single entries. The legacy
#: ``dones`` column (old RLlib stack) is read as ``terminateds`` with ``truncateds=False``.
SCHEMA = MappingProxyType(
    {
        Columns.EPS_ID: Columns.EPS_ID,
        Columns.AGENT_ID: Columns.AGENT_ID,
        Columns.MODULE_ID: Columns.MODULE_ID,
        Columns.OBS: Columns.OBS,
        Columns.ACTIONS: Columns.ACTIONS,
        Columns.REWARDS: Columns.REWARDS,
        Columns.INFOS: Columns.INFOS,
        Columns.NEXT_OBS: Columns.NEXT_OBS,
        Columns.TERMINATEDS: Columns.TERMINATEDS,
        Columns.TRUNCATEDS: Columns.TRUNCATEDS,
        Columns.T: Columns.T,
        "dones": "dones",
    }
)

#: The column of a multi-agent episodes file (beside ``item``) listing each episode's agents,
#: so that they are mapped to modules before any episode is decoded.
EPISODE_AGENTS = "agent_ids"


def take_rows(columns: Mapping[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """Each column's ``rows`` (integer positions, in their order), by ``np.take`` along the
    first axis, which numpy 2 does about ten times faster than indexing (``column[rows]``) for
    columns of more than one dimension, such as observations (15 us against 186 for 7,693 rows
    of 4 floats).

    Examples:
        >>> batch = take_rows({"obs": np.arange(6).reshape(3, 2), "t": np.arange(3)},
        ...                   np.array([2, 0]))
        >>> batch["obs"].tolist(), batch["t"].tolist()
        ([[4, 5], [0, 1]], [2, 0])
    """
    return {name: np.take(column, rows, axis=0) for name, column in columns.items()}
