"""Column names shared by datasets, episodes, connectors and learners (RLlib's ``Columns``)."""

from __future__ import annotations

from types import MappingProxyType


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

#: The seeds' name of the legacy done flag (``input_read_schema={"done": column}``).
LEGACY_DONE = "done"

#: Column Ray Data adds with ``include_paths=True`` (episode formats read it for error messages).
PATH_COLUMN = "path"

#: The column of a multi-agent episodes file (beside ``item``) listing each episode's agents,
#: so that they are mapped to modules before any episode is decoded.
EPISODE_AGENTS = "agent_ids"
