"""Which module each agent of a multi-agent config acts and trains for (``policy_mapping_fn``,
or the data's ``module_id`` column), and each module's spaces."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from offline_rl.errors import ConfigError
from offline_rl.models.multi_rl_module import module_spec_of

Spaces = tuple[gym.Space, gym.Space]


def agent_mapping(multi_agent: Any, agents: list[Any]) -> dict[Any, str]:
    """Each of ``agents``' module (``policy_mapping_fn``); raises ``ConfigError`` naming an
    agent mapped to no module of ``policies``, or one a dict mapping leaves out."""
    mapping, agents = {}, list(dict.fromkeys(agents))
    for agent in agents:
        mapping_fn = multi_agent.policy_mapping_fn
        try:
            module_id = multi_agent.module_of(agent)
        except Exception as error:
            if isinstance(mapping_fn, dict):
                raise ConfigError(f"policy_mapping_fn maps no module to the agent {agent!r} "
                                  f"(the agents are {sorted(map(str, agents))}); add it") from None
            raise _mapping_error(mapping_fn, agent, error) from error
        if module_id not in multi_agent.policies:
            raise ConfigError(f"policy_mapping_fn maps the agent {agent!r} to the module "
                              f"{module_id!r}, which policies does not name "
                              f"({multi_agent.policies})")
        mapping[agent] = module_id
    return mapping


def _mapping_error(mapping_fn: Any, agent: Any, error: Exception) -> ConfigError:
    """The error for a ``policy_mapping_fn`` that raised ``error`` when asked for ``agent``'s
    module."""
    name = getattr(mapping_fn, "__qualname__", type(mapping_fn).__qualname__)
    return ConfigError(
        f"policy_mapping_fn {name}({agent!r}, episode=None) raised {type(error).__name__}: "
        f"{error}; it is asked for the module of every agent of the env and the data when the "
        "algorithm is built, with episode=None: make it return a module id of policies for "
        f"{agent!r}")


def routed_by_module_column(routes: dict[str, str], policies: list[str]) -> dict[str, str]:
    """``routes`` (each agent of the data and the module its rows name in ``module_id``) as
    the ``policy_mapping_fn`` dict of a config without one; ``ConfigError`` naming a module
    the data names that ``policies`` does not."""
    for agent, module_id in routes.items():
        if module_id not in policies:
            raise ConfigError(
                f"the rows of agent {agent!r} name the module {module_id!r} in column "
                f"'module_id', which no module of the config is (policies: {policies}): add "
                f"it to config.multi_agent(policies=...) and give it an RLModuleSpec in "
                "rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=...)), or set "
                "policy_mapping_fn to map the agents to the configured modules")
    return routes


def module_spaces(modules: list[str], mapping: dict[Any, str], envs: list[Any],
                  given: Spaces, rl_module_spec: Any = None) -> dict[str, Spaces]:
    """Each module's (observation, action) spaces: those its spec in ``rl_module_spec`` sets
    (RLlib's ``MultiRLModuleSpec``, or one ``RLModuleSpec`` for all), else those of its agents
    in the env (all the same, else ``ConfigError`` naming them), else ``given``."""
    spaces = {}
    for module_id in modules:
        spec = module_spec_of(rl_module_spec, module_id)
        agents = [agent for agent, mapped in mapping.items() if mapped == module_id]
        found = {agent: (envs[0].observation_spaces[agent], envs[0].action_spaces[agent])
                 for agent in agents if envs and agent in envs[0].possible_agents}
        if len(set(map(repr, found.values()))) > 1:
            raise ConfigError(f"the agents of module {module_id!r} have different spaces in the "
                              f"env ({found}); one module acts for agents of one kind: map them "
                              "to different modules")
        fallback = next(iter(found.values()), given)
        spaces[module_id] = (getattr(spec, "observation_space", None) or fallback[0],
                             getattr(spec, "action_space", None) or fallback[1])
        if None in spaces[module_id]:
            raise ConfigError(f"module {module_id!r} has no spaces: set the env, or "
                              "config.environment(observation_space=..., action_space=...)")
    return spaces
