"""The ``multi_agent`` section: the modules of a multi-agent config, which agent each one acts
and trains for, and which of them train."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from offline_rl.errors import ConfigError
from offline_rl.models.multi_rl_module import MultiRLModuleSpec, module_spec_of
from offline_rl.names import DEFAULT_MODULE_ID
from offline_rl.settings.offline_data import input_problem
from offline_rl.settings.options import Rule, Section, option

#: A module id also names the module's folder in a checkpoint.
MODULE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _is_module_ids(value: Any) -> bool:
    return (isinstance(value, list) and bool(value) and len(set(value)) == len(value)
            and all(isinstance(module_id, str) and MODULE_ID.fullmatch(module_id)
                    for module_id in value))


def _is_mapping(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(agent_id, str | int) and isinstance(module_id, str)
                   for agent_id, module_id in value.items())
    return callable(value)


MODULE_IDS = Rule("None or a non-empty list of distinct module ids (letters, digits and _ . -, "
                  "as each names a checkpoint folder)",
                  lambda value: value is None or _is_module_ids(value))


@dataclass
class MultiAgentConfig(Section):
    """See ``AlgorithmConfig.multi_agent``.

    Examples:
        >>> MultiAgentConfig(policies=["a"], policies_to_train=["b"]).problems()
        [('policies_to_train', "names modules that policies does not: ['b']")]
    """

    #: The module ids (RLlib's policy ids); ``None``: one module, single-agent data.
    policies: list[str] | None = option(None, MODULE_IDS)
    #: The module each agent maps to: RLlib's ``(agent_id, episode, **kwargs) -> module_id``,
    #: or a dict ``{agent_id: module_id}`` (what a YAML file or checkpoint holds).
    policy_mapping_fn: Callable[..., str] | dict[str | int, str] | None = option(None, Rule(
        "None, a function (agent_id, episode, **kwargs) -> module_id or a dict "
        "{agent_id: module_id}", lambda value: value is None or _is_mapping(value)))
    #: The modules trained (``None``: all of ``policies``); the others act as they are.
    policies_to_train: list[str] | None = option(None, MODULE_IDS)

    def joint_problems(self) -> list[tuple[str, str]]:
        if self.policies is None:
            set_without = [name for name in ("policy_mapping_fn", "policies_to_train")
                           if getattr(self, name) is not None]
            return [(name, "set it with policies (the module ids)") for name in set_without]
        problems = []
        if isinstance(self.policies_to_train, list):
            unknown = [module for module in self.policies_to_train if module not in self.policies]
            if unknown:
                problems.append(("policies_to_train",
                                 f"names modules that policies does not: {unknown}"))
        if isinstance(self.policy_mapping_fn, dict):
            unknown = sorted({module for module in self.policy_mapping_fn.values()
                              if module not in self.policies})
            if unknown:
                problems.append(("policy_mapping_fn",
                                 f"maps agents to modules that policies does not name: "
                                 f"{unknown} (policies: {self.policies})"))
        return problems

    @property
    def is_multi_agent(self) -> bool:
        """Whether the config trains modules of agents (``policies`` is set)."""
        return self.policies is not None

    @property
    def trained_modules(self) -> list[str]:
        """The modules trained, in ``policies``' order."""
        trained = self.policies_to_train or self.policies or []
        return [module for module in self.policies or [] if module in trained]

    def module_of(self, agent_id: str | int, episode: Any = None) -> str:
        """The module ``agent_id`` maps to (the one module when no mapping is set); raises
        ``KeyError`` for an agent a dict mapping does not name. A function mapping gets
        ``episode=None`` where agents are mapped as the data is read, not while playing."""
        mapping = self.policy_mapping_fn
        if mapping is None:
            return self.policies[0]
        if isinstance(mapping, dict):
            return mapping[agent_id]
        return mapping(agent_id, episode)

    def pipeline_module(self) -> str | None:
        """The one module a config that trains one module of several trains (its data
        pipeline reads that module's rows); ``None`` for a single-agent config."""
        return self.trained_modules[0] if self.is_multi_agent else None

    def agent_ids(self) -> tuple[str, ...] | None:
        """The agents whose rows a config that trains one module of several reads: those
        ``policy_mapping_fn`` (a dict, as ``MultiAgentAlgorithm`` resolves it) maps to it;
        ``None`` for a single-agent config."""
        if not self.is_multi_agent:
            return None
        if len(self.trained_modules) != 1 or not isinstance(self.policy_mapping_fn, dict):
            raise ConfigError(
                f"a data pipeline reads the rows of one module's agents; this config trains "
                f"{self.trained_modules} (build it: MultiAgentAlgorithm gives each module its own "
                "pipeline)")
        (module,) = self.trained_modules
        return tuple(str(agent) for agent, mapped in self.policy_mapping_fn.items()
                     if mapped == module)


def multi_agent_problems(sections: Any) -> list[tuple[str, str]]:
    """``(field, problem)`` for each option a multi-agent config (``sections``, a
    ``ConfigSections``) cannot honour yet: it would be ignored otherwise."""
    if not sections.multi_agent.is_multi_agent:
        return module_spec_problems(sections)
    evaluation, offline_data = sections.evaluation, sections.offline_data
    unsupported = {
        "input_": input_problem(offline_data.input_) is None and offline_data.input_spec.mixed,
        "offline_data_class": offline_data.offline_data_class is not None,
        "evaluation_num_env_runners": bool(evaluation.evaluation_num_env_runners),
    }
    problems = module_spec_problems(sections)
    multi_agent = sections.multi_agent
    if (multi_agent.policy_mapping_fn is None and len(multi_agent.policies) > 1
            and offline_data.reads_episodes):
        problems.append(("policy_mapping_fn", f"{len(multi_agent.policies)} modules need a "
                         "mapping of each agent to its module (tabular rows without one go to "
                         "the module their module_id column names)"))
    if callable(offline_data.output):
        problems.append(("output", "a custom writer's creator: a multi-agent config records "
                         "its evaluation episodes with offline-rl's writer; give a folder or URI"))
    if offline_data.output and offline_data.output_write_sample_batches:
        problems.append(("output_write_sample_batches", "a multi-agent config records "
                         "MultiAgentEpisodes or their agents' rows, not SampleBatch lines: "
                         "leave it False"))
    return problems + [
        (name, "multi-agent configs do not take it yet (each module trains on its agents' rows "
               "of one input, and evaluation runs in this process): leave it unset")
        for name, is_set in unsupported.items() if is_set]


def module_spec_problems(sections: Any) -> list[tuple[str, str]]:
    """``(field, problem)`` for a ``MultiRLModuleSpec`` in ``rl_module(rl_module_spec=...)``
    whose modules ``multi_agent``'s ``policies`` do not name, and, without an env, for each
    module of a multi-agent config that neither its spec nor ``environment`` gives spaces."""
    spec, multi_agent = sections.rl_module.rl_module_spec, sections.multi_agent
    named = sorted(spec.rl_module_specs) if isinstance(spec, MultiRLModuleSpec) else []
    if not multi_agent.is_multi_agent:
        if named and named != [DEFAULT_MODULE_ID]:
            return [("rl_module_spec", f"the MultiRLModuleSpec names the modules {named}, "
                     f"which train as a multi-agent config: set config.multi_agent(policies="
                     f"{set(named)}, policy_mapping_fn=...), as RLlib needs too")]
        return []
    unknown = [module_id for module_id in named if module_id not in multi_agent.policies]
    if unknown:
        return [("rl_module_spec", f"the MultiRLModuleSpec names modules that policies does "
                 f"not: {unknown} (policies: {multi_agent.policies}); add them to "
                 "config.multi_agent(policies=...), or leave their specs out")]
    environment = sections.environment
    if environment.env is not None:
        return []
    problems = []
    for module_id in multi_agent.policies:
        module_spec = module_spec_of(spec, module_id)
        missing = [name for name in ("observation_space", "action_space")
                   if getattr(module_spec, name, None) is None
                   and getattr(environment, name) is None]
        if missing:
            problems.append(("environment", f"module {module_id!r} has no {' or '.join(missing)}"
                             f": give it in its spec (rl_module(rl_module_spec=MultiRLModuleSpec("
                             f"rl_module_specs={{{module_id!r}: RLModuleSpec(observation_space="
                             "..., action_space=...)}))), or set env=, or both "
                             "observation_space= and action_space= (all modules') in "
                             "config.environment()"))
    return problems
