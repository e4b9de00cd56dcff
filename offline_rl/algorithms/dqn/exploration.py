"""The ``exploration_config`` of DQN and DiscreteCQL (RLlib's key): the policy the trained
Q-network acts with, and that recording and the sampler sample and off-policy estimators judge."""

from __future__ import annotations

from typing import Any

from offline_rl.models.model_config import DefaultModelConfig, DQNModelConfig
from offline_rl.settings.options import is_finite_number

#: What ``exploration_config`` may be.
FORMS = ("{} (greedy), {'type': 'SoftQ', 'temperature': T > 0} or {'type': 'EpsilonGreedy', "
         "'final_epsilon': epsilon in [0, 1)}")
#: Each type's keys and their defaults (RLlib's for DQN).
DEFAULTS: dict[str, dict[str, float]] = {"SoftQ": {"temperature": 1.0},
                                         "EpsilonGreedy": {"final_epsilon": 0.02}}
#: RLlib's epsilon schedule: it advances with env steps sampled; offline-rl's policies act with
#: one epsilon.
SCHEDULE_KEYS = ("initial_epsilon", "warmup_timesteps", "epsilon_timesteps")


def exploration_problem(value: Any) -> str | None:
    """What is wrong with an ``exploration_config``, or ``None``.

    Examples:
        >>> exploration_problem({"type": "SoftQ", "temperature": 0.5}) is None
        True
        >>> exploration_problem({"type": "EpsilonGreedy", "initial_epsilon": 1.0})[:60]
        "has RLlib's epsilon schedule ['initial_epsilon'], which adva"
    """
    if not isinstance(value, dict) or (value and value.get("type") not in DEFAULTS):
        return f"must be {FORMS}, got {value!r}"
    if not value:
        return None
    kind = value["type"]
    schedule = [key for key in SCHEDULE_KEYS if key in value]
    if schedule:
        return (f"has RLlib's epsilon schedule {schedule}, which advances with the env steps "
                "sampled; offline-rl's policies act with one epsilon: give only final_epsilon, "
                "the epsilon the trained policy acts with")
    unknown = sorted(set(value) - {"type", *DEFAULTS[kind]})
    if unknown:
        return f"{kind} takes {sorted(DEFAULTS[kind])}, not {unknown}"
    settings = exploration_settings(value)
    temperature, epsilon = settings["softq_temperature"], settings["epsilon"]
    if kind == "SoftQ" and not (is_finite_number(temperature) and temperature > 0):
        return f"SoftQ temperature must be a finite number > 0, got {temperature!r}"
    if kind == "EpsilonGreedy" and not (is_finite_number(epsilon) and 0 <= epsilon < 1):
        return f"EpsilonGreedy final_epsilon must be a finite number in [0, 1), got {epsilon!r}"
    return None


def exploration_settings(value: dict[str, Any]) -> dict[str, Any]:
    """The module's ``softq_temperature`` and ``epsilon`` for a valid ``exploration_config``.

    Examples:
        >>> exploration_settings({"type": "SoftQ"})
        {'softq_temperature': 1.0, 'epsilon': 0.0}
        >>> exploration_settings({})
        {'softq_temperature': None, 'epsilon': 0.0}
    """
    given = {**DEFAULTS.get(value.get("type"), {}), **value}
    return {"softq_temperature": given.get("temperature"),
            "epsilon": given.get("final_epsilon", 0.0)}


def acting_model_config(model_config: DefaultModelConfig, exploration_config: dict[str, Any], *,
                        dueling: bool, explore: bool) -> DQNModelConfig:
    """``model_config`` as the ``DQNModelConfig`` of a Q-network with or without a ``dueling``
    head that acts with a valid ``exploration_config`` (sampling it in ``compute_actions`` by
    default when ``explore``).

    Examples:
        >>> config = acting_model_config(DefaultModelConfig(fcnet_hiddens=[8]),
        ...                              {"type": "EpsilonGreedy"}, dueling=False, explore=False)
        >>> config.fcnet_hiddens, config.epsilon, config.softq_temperature, config.explore
        ([8], 0.02, None, False)
    """
    return DQNModelConfig(**{**model_config.to_dict(), "dueling": dueling, "explore": explore,
                             **exploration_settings(exploration_config)})
