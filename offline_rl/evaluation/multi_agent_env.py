"""``make_multi_agent_env``: an env in one of the multi-agent forms offline-rl takes (RLlib's
``MultiAgentEnv`` shape, a PettingZoo ``ParallelEnv`` or ``AECEnv``), by PettingZoo name, from a
creator or as an instance, as offline-rl's ``MultiAgentEnv``.

Examples:
    >>> env = make_multi_agent_env("MultiAgentCartPole", {"num_agents": 3})
    >>> env.possible_agents, env.action_spaces["agent_2"]
    (['agent_0', 'agent_1', 'agent_2'], Discrete(2))
    >>> observations, infos = env.reset(seed=0)
    >>> _, rewards, terminateds, _, _ = env.step({agent: 0 for agent in env.agents_to_act})
    >>> rewards, terminateds["__all__"]
    ({'agent_0': 1.0, 'agent_1': 1.0, 'agent_2': 1.0}, False)
    >>> type(make_multi_agent_env("classic/tictactoe_v3")).__name__
    'PettingZooTurnBasedEnv'
    >>> type(make_multi_agent_env("classic/rps_v2", {"max_cycles": 5})).__name__
    'PettingZooParallelEnv'
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from offline_rl.episodes.multi_agent_episode import AgentID
from offline_rl.errors import ConfigError
from offline_rl.evaluation.multi_agent_cartpole import AlternatingCartPole, MultiAgentCartPole
from offline_rl.evaluation.multi_agent_interface import MultiAgentEnv, StepResult, reset_dict_env
from offline_rl.evaluation.pettingzoo_envs import PettingZooParallelEnv, PettingZooTurnBasedEnv

#: offline-rl's own multi-agent envs, by the name a config (or YAML file) gives.
OFFLINE_RL_ENVS = {"MultiAgentCartPole": MultiAgentCartPole,
                   "AlternatingCartPole": AlternatingCartPole}
#: What ``make_multi_agent_env`` takes, for its error messages.
ACCEPTED = (f"the name of one of offline-rl's envs {sorted(OFFLINE_RL_ENVS)} or of a "
            "PettingZoo env (pettingzoo>=1.27 registers them, e.g. "
            "'classic/tictactoe_v3'), a creator of the env (a class or function: env_config -> "
            "env, or one that takes env_config as keyword arguments, as PettingZoo's env and "
            "parallel_env functions) or an env instance, in RLlib's MultiAgentEnv shape or a "
            "PettingZoo ParallelEnv or AECEnv")


class RLlibShapedEnv(MultiAgentEnv):
    """An env already in RLlib's ``MultiAgentEnv`` shape (duck-typed: ``observation_spaces``
    and ``action_spaces`` dicts, ``reset``/``step``); its dicts pass through, with rewards as
    floats and ``"__all__"`` set ``False`` where the env left it out. ``possible_agents``
    defaults to the agents of ``observation_spaces``."""

    def __init__(self, env: Any):
        self.env = env
        super().__init__(getattr(env, "possible_agents", None) or list(env.observation_spaces))

    @property
    def unwrapped(self) -> Any:
        """The user's env (as gymnasium's wrappers name the env they wrap)."""
        return getattr(self.env, "unwrapped", self.env)

    def _spaces_of(self, agent_id: AgentID) -> tuple[gym.Space, gym.Space]:
        spaces = (self.env.observation_spaces.get(agent_id), self.env.action_spaces.get(agent_id))
        if any(space is None for space in spaces):
            raise ValueError(f"{type(self.env).__name__} has no observation or action space "
                             f"for agent {agent_id!r} in its observation_spaces/action_spaces")
        return spaces

    def _reset(self, seed: int | None, options: dict | None
               ) -> tuple[dict[AgentID, Any], dict[AgentID, dict]]:
        return reset_dict_env(self.env, seed, options)

    def _step(self, actions: dict[AgentID, Any]) -> StepResult:
        observations, rewards, terminateds, truncateds, infos = self.env.step(actions)
        return (dict(observations), {agent_id: float(reward) for agent_id, reward in
                                     rewards.items()}, dict(terminateds), dict(truncateds),
                dict(infos))

    def close(self) -> None:
        self.env.close()


def make_multi_agent_env(env: Any, env_config: Mapping[str, Any] | None = None
                         ) -> MultiAgentEnv:
    """The env ``env`` names (one of ``OFFLINE_RL_ENVS``, made with ``env_config``; else in
    PettingZoo's registry: ``pettingzoo.make(..., **env_config)``, its parallel API where it
    has one), makes (a creator, called with ``env_config``) or is (an
    instance, with no ``env_config``), adapted to ``MultiAgentEnv``: one already adapted is
    returned as it is.

    Raises ``ConfigError`` for a name PettingZoo does not register (or without pettingzoo's
    registry installed), for a single-agent gymnasium env, and for anything that is none of the
    forms taken.
    """
    config = dict(env_config or {})
    if isinstance(env, str) and env in OFFLINE_RL_ENVS:
        return _adapt(OFFLINE_RL_ENVS[env](config))
    if isinstance(env, str):
        return _adapt(_make_registered(env, config))
    if _is_creator(env):
        return _adapt(_create(env, config))
    if config:
        raise ConfigError(f"env_config={config!r} was given with an env instance "
                          f"({type(env).__name__}); it applies to a name or creator only")
    return _adapt(env)


def _make_registered(name: str, env_config: dict[str, Any]) -> Any:
    """PettingZoo's env registered as ``name``: its ``ParallelEnv`` if it has one, else its
    ``AECEnv``. PettingZoo's own error passes through where the env's module fails to import
    (it names the extra to install)."""
    try:
        import pettingzoo
        from pettingzoo.env_registry.exceptions import (
            NameNotFound,
            NamespaceNotFound,
            VersionNotFound,
        )
    except ImportError as error:
        raise ConfigError(f"env={name!r}: making a multi-agent env by name needs PettingZoo's "
                          "registry (pip install 'pettingzoo>=1.27'); or pass a creator of the "
                          "env or an env instance") from error
    not_found = (NameNotFound, NamespaceNotFound, VersionNotFound)
    try:
        pettingzoo.spec("parallel", name)
        api = "parallel"
    except not_found:
        api = "aec"
    try:
        return pettingzoo.make(api, name, **env_config)
    except not_found as error:
        raise ConfigError(f"env={name!r} is not an env PettingZoo registers ({error}); pass "
                          f"{ACCEPTED}") from error


def _is_creator(env: Any) -> bool:
    """A class, or a callable that is not an env itself."""
    looks_like_env = callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))
    return isinstance(env, type) or (callable(env) and not looks_like_env)


def _create(creator: Callable[..., Any], env_config: dict[str, Any]) -> Any:
    """``creator(env_config)``, or ``creator(**env_config)`` where the creator takes no
    positional parameter (PettingZoo's ``env``/``parallel_env`` functions)."""
    try:
        parameters = inspect.signature(creator).parameters.values()
    except (TypeError, ValueError):
        return creator(env_config)
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                  inspect.Parameter.VAR_POSITIONAL)
    if any(parameter.kind in positional for parameter in parameters):
        return creator(env_config)
    return creator(**env_config)


def _adapt(env: Any) -> MultiAgentEnv:
    """``env`` as a ``MultiAgentEnv``, by the API it has."""
    if isinstance(env, MultiAgentEnv):
        return env
    steps = callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))
    # PettingZoo's spaces are methods of the agent; RLlib's are dicts (a gym.Space is no callable).
    if steps and callable(getattr(env, "observation_space", None)):
        if callable(getattr(env, "agent_iter", None)) and callable(getattr(env, "last", None)):
            return PettingZooTurnBasedEnv(env)
        return PettingZooParallelEnv(env)
    # Before the gymnasium check: RLlib's MultiAgentEnv is a gymnasium.Env.
    if steps and all(isinstance(getattr(env, name, None), Mapping)
                     for name in ("observation_spaces", "action_spaces")):
        return RLlibShapedEnv(env)
    if isinstance(env, gym.Env):
        raise ConfigError(f"{type(env).__name__} is a single-agent gymnasium env; pass "
                          f"{ACCEPTED} (offline_rl.evaluation.rollout plays gymnasium envs)")
    raise ConfigError(f"{type(env).__name__} is not a multi-agent env offline-rl can step: "
                      f"pass {ACCEPTED}")
