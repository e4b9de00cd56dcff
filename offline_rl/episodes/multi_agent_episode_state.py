"""A multi-agent episode's state (RLlib's ``MultiAgentEpisode.get_state()`` layout, as safe
data): written from an episode, and read safely (every field checked, agent episodes, buffers
and spaces rebuilt, nothing imported or executed).

RLlib's own ``get_state()`` holds live objects: the agent-to-module mapping function, gymnasium
spaces and ``InfiniteLookbackBuffer`` objects, none of which msgpack can store. This layout keeps
RLlib's keys and turns those into data: ``agent_to_module_mapping_fn`` is always ``None`` (a
function is code; the agents' modules are in ``_agent_to_module_mapping``), the spaces are
``{agent_id: space dict}`` and ``env_t_to_agent_t`` is ``{agent_id: buffer state}``.
``agent_episodes`` is, as in RLlib, a list of ``(agent_id, SingleAgentEpisode state)`` pairs.

Examples:
    >>> read_multi_agent_episode_state({"id_": "x"})
    Traceback (most recent call last):
    ...
    ValueError: multi-agent episode state is missing ['agent_to_module_mapping_fn', ...]
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.lookback import InfiniteLookbackBuffer
from offline_rl.spaces import shared_space_from_dict, space_to_dict

#: Keys of ``get_state()``, in RLlib's order.
STATE_KEYS = (
    "id_", "agent_to_module_mapping_fn", "_agent_to_module_mapping", "observation_space",
    "action_space", "env_t_started", "env_t", "agent_t_started", "env_t_to_agent_t",
    "_hanging_actions_end", "_hanging_extra_model_outputs_end", "_hanging_rewards_end",
    "_hanging_rewards_begin", "is_terminated", "is_truncated", "agent_episodes", "_start_time",
    "_last_step_time", "custom_data",
)
#: The private fields of ``MultiAgentEpisode`` its state holds.
PRIVATE_KEYS = tuple(key for key in STATE_KEYS if key.startswith("_"))
#: The tag RLlib's ``env_t_to_agent_t`` holds for env steps at which an agent did not step.
SKIP_ENV_TS_TAG = "S"
#: Deepest nesting of lists and dicts read in hanging values and custom data.
MAX_DEPTH = 64
_PLAIN_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def multi_agent_episode_state(episode: Any, private: dict[str, Any]) -> dict[str, Any]:
    """``episode`` (a ``MultiAgentEpisode``) in RLlib's state layout, the ``STATE_KEYS``: its
    public fields, and the private ones (``PRIVATE_KEYS``) it gives in ``private``."""
    return {
        "id_": episode.id_,
        "agent_to_module_mapping_fn": None,
        "_agent_to_module_mapping": dict(private["_agent_to_module_mapping"]),
        "observation_space": {agent_id: space_to_dict(space)
                              for agent_id, space in episode.observation_space.items()},
        "action_space": {agent_id: space_to_dict(space)
                         for agent_id, space in episode.action_space.items()},
        "env_t_started": episode.env_t_started,
        "env_t": episode.env_t,
        "agent_t_started": dict(episode.agent_t_started),
        "env_t_to_agent_t": {agent_id: mapping.get_state()
                             for agent_id, mapping in episode.env_t_to_agent_t.items()},
        "_hanging_actions_end": dict(private["_hanging_actions_end"]),
        "_hanging_extra_model_outputs_end": dict(private["_hanging_extra_model_outputs_end"]),
        "_hanging_rewards_end": dict(private["_hanging_rewards_end"]),
        "_hanging_rewards_begin": dict(private["_hanging_rewards_begin"]),
        "is_terminated": bool(episode.is_terminated),
        "is_truncated": bool(episode.is_truncated),
        "agent_episodes": [(agent_id, agent_episode.get_state())
                           for agent_id, agent_episode in episode.agent_episodes.items()],
        "_start_time": private["_start_time"],
        "_last_step_time": private["_last_step_time"],
        "custom_data": episode.custom_data,
    }


def read_multi_agent_episode_state(state: dict[str, Any]) -> dict[str, Any]:
    """The state's fields checked and rebuilt: spaces as gymnasium spaces, ``env_t_to_agent_t``
    as buffers, ``agent_episodes`` as a dict of ``SingleAgentEpisode`` by agent id (each read
    and validated by ``SingleAgentEpisode.from_state``), each consistent with the others (an
    agent's mapping ends at its episode's ``t``); ``agent_to_module_mapping_fn`` is left out.

    Raises ``ValueError`` naming the field when the state is malformed.
    """
    if not isinstance(state, dict):
        raise ValueError(f"a multi-agent episode state must be a dict, got {type(state).__name__}")
    missing = [key for key in STATE_KEYS if key != "custom_data" and key not in state]
    if missing:
        raise ValueError(f"multi-agent episode state is missing {missing}")
    id_ = state["id_"]
    if not _is_id(id_):
        _fail("id_", f"must be a str (or an int), got {_shown(id_)}")
    if state["agent_to_module_mapping_fn"] is not None:
        _fail("agent_to_module_mapping_fn",
              f"must be None (a mapping function is code, which is neither stored nor read; the "
              f"agents' modules are in '_agent_to_module_mapping'), got "
              f"{_shown(state['agent_to_module_mapping_fn'])}")
    mapping = _agent_dict(state, "_agent_to_module_mapping")
    for agent_id, module_id in mapping.items():
        if not isinstance(module_id, str):
            _fail(f"_agent_to_module_mapping[{agent_id!r}]",
                  f"must be a module id (str), got {_shown(module_id)}")
    env_t_started, env_t = _count(state, "env_t_started"), _count(state, "env_t")
    if env_t < env_t_started:
        _fail("env_t", f"{env_t} is before env_t_started {env_t_started}")
    for flag in ("is_terminated", "is_truncated"):
        if not isinstance(state[flag], bool | np.bool_):
            _fail(flag, f"must be a bool, got {_shown(state[flag])}")
    extras = _agent_dict(state, "_hanging_extra_model_outputs_end")
    for agent_id, outputs in extras.items():
        if outputs is not None and not isinstance(outputs, dict):
            _fail(f"_hanging_extra_model_outputs_end[{agent_id!r}]",
                  f"must be a dict of model outputs (or None), got {_shown(outputs)}")
        _check_data(outputs, f"_hanging_extra_model_outputs_end[{agent_id!r}]", 0)
    actions = _agent_dict(state, "_hanging_actions_end")
    for agent_id, action in actions.items():
        _check_data(action, f"_hanging_actions_end[{agent_id!r}]", 0)
    custom_data = state.get("custom_data") or {}
    if not isinstance(custom_data, dict):
        _fail("custom_data", f"must be a dict, got {_shown(custom_data)}")
    _check_data(custom_data, "custom_data", 0)
    episodes = _agent_episodes(state["agent_episodes"], id_, mapping)
    mappings = {agent_id: _mapping(value, agent_id)
                for agent_id, value in _agent_dict(state, "env_t_to_agent_t").items()}
    _check_mappings(mappings, episodes, env_t - env_t_started)
    strays = [agent_id for agent_id in actions if agent_id not in episodes]
    if strays:
        _fail("_hanging_actions_end", f"holds actions of agents {strays}, which have no episode")
    return {
        "id_": id_,
        "_agent_to_module_mapping": dict(mapping),
        "observation_space": _spaces(state, "observation_space"),
        "action_space": _spaces(state, "action_space"),
        "env_t_started": env_t_started,
        "env_t": env_t,
        "agent_t_started": {agent_id: _int(value, f"agent_t_started[{agent_id!r}]")
                            for agent_id, value in _agent_dict(state, "agent_t_started").items()},
        "env_t_to_agent_t": mappings,
        "_hanging_actions_end": dict(actions),
        "_hanging_extra_model_outputs_end": dict(extras),
        "_hanging_rewards_end": _rewards(state, "_hanging_rewards_end"),
        "_hanging_rewards_begin": _rewards(state, "_hanging_rewards_begin"),
        "is_terminated": bool(state["is_terminated"]),
        "is_truncated": bool(state["is_truncated"]),
        "agent_episodes": episodes,
        "_start_time": _time(state, "_start_time"),
        "_last_step_time": _time(state, "_last_step_time"),
        "custom_data": custom_data,
    }


def _fail(field: str, problem: str) -> None:
    raise ValueError(f"multi-agent episode state field {field!r} {problem}")


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.80}"


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _agent_dict(state: dict[str, Any], field: str) -> dict:
    value = state[field]
    if not isinstance(value, dict):
        _fail(field, f"must be a dict by agent id, got {_shown(value)}")
    for agent_id in value:
        if not _is_id(agent_id):
            _fail(field, f"has a key that is not an agent id (str or int): {_shown(agent_id)}")
    return value


def _int(value: Any, field: str) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        _fail(field, f"must be an int, got {_shown(value)}")
    return int(value)


def _count(state: dict[str, Any], field: str) -> int:
    value = _int(state[field], field)
    if value < 0:
        _fail(field, f"must be >= 0, got {value}")
    return value


def _time(state: dict[str, Any], field: str) -> float | None:
    value = state[field]
    if value is not None and (not isinstance(value, int | float | np.number)
                              or isinstance(value, bool)):
        _fail(field, f"must be a number or None, got {_shown(value)}")
    return value


def _rewards(state: dict[str, Any], field: str) -> dict:
    rewards = _agent_dict(state, field)
    for agent_id, reward in rewards.items():
        if not isinstance(reward, int | float | np.number) or isinstance(reward, bool):
            _fail(f"{field}[{agent_id!r}]", f"must be a number, got {_shown(reward)}")
    return dict(rewards)


def _spaces(state: dict[str, Any], field: str) -> dict[Any, gym.Space]:
    if state[field] is None:
        return {}
    spaces = {}
    for agent_id, space in _agent_dict(state, field).items():
        try:
            spaces[agent_id] = shared_space_from_dict(space)
        except ValueError as error:
            _fail(f"{field}[{agent_id!r}]", f"is not a space dict: {error}")
    return spaces


def _mapping(state: Any, agent_id: Any) -> InfiniteLookbackBuffer:
    field = f"env_t_to_agent_t[{agent_id!r}]"
    if not isinstance(state, dict):
        _fail(field, f"must be a buffer state dict, got {_shown(state)}")
    try:
        buffer = InfiniteLookbackBuffer.from_state(state)
    except ValueError as error:
        _fail(field, f"is not a buffer state: {error}")
    for item in buffer.data:
        if item != SKIP_ENV_TS_TAG and (not isinstance(item, int | np.integer)
                                        or isinstance(item, bool)):
            _fail(field, f"must hold agent steps (ints) and {SKIP_ENV_TS_TAG!r} tags, got "
                         f"{_shown(item)}")
    buffer.data = list(buffer.data)
    buffer.finalized = False
    return buffer


def _check_mappings(mappings: dict[Any, InfiniteLookbackBuffer],
                    episodes: dict[Any, SingleAgentEpisode], env_steps: int) -> None:
    """Raises unless each agent's episode has a mapping with an entry for the chunk's start
    and each of its ``env_steps``, whose last agent step is the agent's ``t``."""
    if set(mappings) != set(episodes):
        _fail("env_t_to_agent_t", f"has agents {sorted(map(str, mappings))}, 'agent_episodes' "
                                  f"{sorted(map(str, episodes))}; expected the same")
    for agent_id, episode in episodes.items():
        field, mapping = f"env_t_to_agent_t[{agent_id!r}]", mappings[agent_id]
        if len(mapping) < env_steps + 1:
            _fail(field, f"has {len(mapping)} entries after its lookback; expected one for the "
                         f"chunk's start and each of its {env_steps} env steps")
        agent_steps = [step for step in mapping.data if step != SKIP_ENV_TS_TAG]
        if not agent_steps or agent_steps[-1] != episode.t:
            _fail(field, f"ends at agent step {agent_steps[-1] if agent_steps else None}, but "
                         f"the agent's episode is at t={episode.t}")


def _agent_episodes(pairs: Any, id_: str, mapping: dict) -> dict[Any, SingleAgentEpisode]:
    field = "agent_episodes"
    if not isinstance(pairs, list | tuple):
        _fail(field, f"must be a list of (agent id, episode state) pairs, got {_shown(pairs)}")
    episodes: dict[Any, SingleAgentEpisode] = {}
    for pair in pairs:
        if not isinstance(pair, list | tuple) or len(pair) != 2 or not _is_id(pair[0]):
            _fail(field, f"must hold (agent id, episode state) pairs, got {_shown(pair)}")
        agent_id, agent_state = pair
        where = f"{field}[{agent_id!r}]"
        if agent_id in episodes:
            _fail(field, f"lists agent {agent_id!r} twice")
        if not isinstance(agent_state, dict):
            _fail(where, f"must be a SingleAgentEpisode state dict, got {_shown(agent_state)}")
        _check_data(agent_state.get("custom_data"), f"{where}.custom_data", 0)
        try:
            episode = SingleAgentEpisode.from_state(agent_state)
        except ValueError as error:
            _fail(where, f"is not a valid episode state: {error}")
        if episode.agent_id != agent_id:
            _fail(where, f"is the episode of agent {episode.agent_id!r}, not of {agent_id!r}")
        if episode.multi_agent_episode_id != id_:
            _fail(where, f"belongs to multi-agent episode {episode.multi_agent_episode_id!r}, "
                         f"not to {id_!r}")
        if agent_id in mapping and episode.module_id != mapping[agent_id]:
            _fail(where, f"has module {episode.module_id!r}, but '_agent_to_module_mapping' maps "
                         f"agent {agent_id!r} to {mapping[agent_id]!r}")
        episodes[agent_id] = episode
    return episodes


def _check_data(value: Any, field: str, depth: int) -> None:
    """Raises unless ``value`` is plain data: scalars, strings, bytes, numpy values without
    Python objects, and lists and dicts of those (no callables, no arbitrary objects)."""
    if depth > MAX_DEPTH:
        _fail(field, f"nests more than {MAX_DEPTH} deep")
    if isinstance(value, _PLAIN_SCALARS):
        return
    if isinstance(value, np.ndarray | np.generic):
        if value.dtype.hasobject:
            _fail(field, f"holds a numpy {value.dtype} value of Python objects; only plain data "
                         "is read")
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_data(item, f"{field}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, _PLAIN_SCALARS):
                _fail(field, f"has a key that is not plain data: {_shown(key)}")
            _check_data(item, f"{field}[{key!r}]", depth + 1)
        return
    _fail(field, f"must hold plain data (numbers, strings, arrays, lists, dicts), got "
                 f"{_shown(value)}")
