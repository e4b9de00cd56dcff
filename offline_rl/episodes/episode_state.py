"""An episode's state (RLlib's ``SingleAgentEpisode.get_state()`` layout): written from an
episode, and read safely (every field checked, buffers and spaces rebuilt, nothing executed).

Examples:
    >>> fields = read_episode_state({"is_terminated": True})
    Traceback (most recent call last):
    ...
    ValueError: episode state is missing ['id_', 'agent_id', ...]
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.episodes.lookback import InfiniteLookbackBuffer
from offline_rl.spaces import shared_space_from_dict, space_to_dict

#: Keys of ``get_state()``, in RLlib's order.
STATE_KEYS = (
    "id_", "agent_id", "module_id", "multi_agent_episode_id", "observations", "actions",
    "rewards", "infos", "extra_model_outputs", "is_terminated", "is_truncated", "t_started", "t",
    "_observation_space", "_action_space", "_start_time", "_last_step_time", "custom_data",
)
#: The private fields of ``SingleAgentEpisode`` its state holds as they are.
PRIVATE_KEYS = ("_start_time", "_last_step_time")


def episode_state(episode: Any, private: dict[str, Any]) -> dict[str, Any]:
    """``episode`` (a ``SingleAgentEpisode``) in RLlib's state layout, the ``STATE_KEYS``: its
    public fields, and the private ones (``PRIVATE_KEYS``) it gives in ``private``."""
    return {
        "id_": episode.id_,
        "agent_id": episode.agent_id,
        "module_id": episode.module_id,
        "multi_agent_episode_id": episode.multi_agent_episode_id,
        "observations": episode.observations.get_state(),
        "actions": episode.actions.get_state(),
        "rewards": episode.rewards.get_state(),
        "infos": episode.infos.get_state(),
        "extra_model_outputs": {key: buffer.get_state()
                                for key, buffer in episode.extra_model_outputs.items()} or None,
        "is_terminated": episode.is_terminated,
        "is_truncated": episode.is_truncated,
        "t_started": episode.t_started,
        "t": episode.t,
        "_observation_space": space_to_dict(episode.observation_space),
        "_action_space": space_to_dict(episode.action_space),
        "_start_time": private["_start_time"],
        "_last_step_time": private["_last_step_time"],
        "custom_data": episode.custom_data,
    }


def read_episode_state(state: dict[str, Any]) -> dict[str, Any]:
    """The state's column buffers (``observations``, ``infos``, ``actions``, ``rewards``,
    ``extra_model_outputs``) and spaces (``_observation_space``, ``_action_space``), rebuilt;
    raises ``ValueError`` naming the field when the state is malformed."""
    if "agent_episodes" in state:  # RLlib's MultiAgentEpisode.get_state()
        agents = state["agent_episodes"]  # (agent id, state) pairs; a dict in older layouts
        names = sorted(str(agent[0] if isinstance(agent, list | tuple) and agent else agent)
                       for agent in agents) if isinstance(agents, list | dict) else "?"
        raise ValueError(f"a MultiAgentEpisode state (agents {names}), not a SingleAgentEpisode "
                         "state: read it with MultiAgentEpisode.from_state")
    missing = [key for key in STATE_KEYS if key != "custom_data" and key not in state]
    if missing:
        raise ValueError(f"episode state is missing {missing}")
    if not isinstance(state["id_"], str | int) or isinstance(state["id_"], bool):
        raise ValueError(f"episode state field 'id_' must be a str (or an int), got "
                         f"{type(state['id_']).__name__} {state['id_']!r:.80}")
    for flag in ("is_terminated", "is_truncated"):
        if not isinstance(state[flag], bool | np.bool_):
            raise ValueError(f"episode state field {flag!r} must be a bool, got "
                             f"{type(state[flag]).__name__} {state[flag]!r}")
    for counter in ("t_started", "t"):
        if isinstance(state[counter], bool) or not isinstance(state[counter], int | np.integer) \
                or state[counter] < 0:
            raise ValueError(f"episode state field {counter!r} must be an int >= 0 (a timestep), "
                             f"got {type(state[counter]).__name__} {state[counter]!r:.80}")
    if state["t"] < state["t_started"]:
        raise ValueError(f"episode state field 't' ({state['t']}) is before 't_started' "
                         f"({state['t_started']}); t is the timestep after the last step")
    extra_states = state["extra_model_outputs"] or {}
    if not isinstance(extra_states, dict):
        raise ValueError("episode state field 'extra_model_outputs' must be a dict, got "
                         f"{type(extra_states).__name__}")
    buffers = {field: _buffer(state[field], field)
               for field in ("observations", "infos", "actions", "rewards")}
    lookbacks = {field: buffer.lookback for field, buffer in buffers.items()}
    if len(set(lookbacks.values())) > 1:
        raise ValueError(f"episode state buffers have different lookbacks ({lookbacks}); one "
                         "episode's buffers share one lookback (len_lookback_buffer)")
    return {
        **buffers,
        "extra_model_outputs": {key: _buffer(value, f"extra_model_outputs[{key!r}]")
                                for key, value in extra_states.items()},
        "_observation_space": _space(state, "_observation_space"),
        "_action_space": _space(state, "_action_space"),
    }


def _buffer(state: Any, field: str) -> InfiniteLookbackBuffer:
    if not isinstance(state, dict):
        raise ValueError(f"episode state field {field!r} must be a buffer state dict, got "
                         f"{type(state).__name__}")
    try:
        return InfiniteLookbackBuffer.from_state(state)
    except ValueError as error:
        raise ValueError(f"episode state field {field!r}: {error}") from None


def _space(state: dict[str, Any], field: str) -> gym.Space | None:
    try:
        return shared_space_from_dict(state[field])
    except ValueError as error:
        raise ValueError(f"episode state field {field!r}: {error}") from None
