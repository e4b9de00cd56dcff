"""How one env step of a multi-agent episode lands on each agent: what it brought the agent
(``AgentStep``), how that is recorded (``step_kind``), and RLlib's per-env-step lists recorded
step by step (``add_env_steps``, the ``MultiAgentEpisode`` constructor's).

The kinds ``step_kind`` tells apart, by what the agent got and what hangs for it:

- ``"first"``: its first observation (its episode starts);
- ``"complete"``: the observation that ends its step (with the action given now or hanging),
  or termination while its action hangs (its last observation repeated);
- ``"hang"``: an action whose next observation is still to come;
- ``"pending"``: nothing to record yet (a reward alone waits with what hangs);
- ``"end"``: done without a step to complete; ``"drop"``: done before its first observation;
- ``"done"``: nothing, after it is done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from offline_rl.episodes.episode import SingleAgentEpisode
    from offline_rl.episodes.multi_agent_episode import MultiAgentEpisode

#: The key of ``terminateds``/``truncateds`` that ends the episode for every agent.
ALL = "__all__"


class AgentStep(NamedTuple):
    """What one env step brought one agent (``reward`` is ``None`` when it got none)."""

    observation: Any
    has_observation: bool
    action: Any
    has_action: bool
    reward: Any
    infos: dict | None
    extra_model_outputs: dict | None
    terminated: bool
    truncated: bool


def step_kind(step: AgentStep, episode: SingleAgentEpisode | None, hanging: bool,
              where: str) -> str:
    """How ``step`` is recorded for an agent whose episode is ``episode`` (``None`` before its
    first observation) and whose action ``hanging`` waits for its next observation; raises
    ``ValueError`` starting with ``where`` if it cannot be.

    Examples:
        >>> step = AgentStep(0, True, None, False, None, None, None, False, False)
        >>> step_kind(step, None, False, "agent 'x'")
        'first'
        >>> step_kind(step._replace(has_action=True, action=1), None, False, "agent 'x'")
        Traceback (most recent call last):
        ...
        ValueError: agent 'x' acted before its first observation
    """
    done = step.terminated or step.truncated
    if episode is not None and episode.is_done:
        if step.has_observation or step.has_action or step.reward is not None:
            raise ValueError(f"{where} is done since an earlier step but got data")
        return "done"
    if step.has_action and episode is None:
        raise ValueError(f"{where} acted before its first observation")
    if step.has_action and hanging:
        raise ValueError(f"{where} acted again before getting the observation that follows "
                         "its previous action")
    if step.has_observation:
        if episode is None:
            return "drop" if done else "first"
        if not (step.has_action or hanging):
            raise ValueError(f"{where} got an observation without having acted on its "
                             "previous one")
        if step.has_action and step.reward is None:
            raise ValueError(f"{where} acted and got its next observation but no reward")
        return "complete"
    if step.has_action or hanging:
        if step.truncated:
            raise ValueError(f"{where} was truncated after acting but got no last "
                             "observation (one is needed to bootstrap from)")
        if step.terminated:
            return "complete"
        return "hang" if step.has_action else "pending"
    if done:
        return "drop" if episode is None else "end"
    return "pending"


def add_env_steps(episode: MultiAgentEpisode, observations: list[dict],
                  infos: list[dict] | None, actions: list[dict], rewards: list[dict],
                  extra_model_outputs: list[dict] | None, terminateds: dict | bool,
                  truncateds: dict | bool) -> None:
    """Records RLlib's per-env-step lists (``observations[0]`` from the reset, then one entry
    per step; ``terminateds``/``truncateds`` for the last step) into ``episode`` with
    ``add_env_reset``/``add_env_step``."""
    steps = len(observations) - 1
    lengths = {"actions": len(actions), "rewards": len(rewards),
               "infos": steps if infos is None else len(infos) - 1,
               "extra_model_outputs": len(extra_model_outputs or actions)}
    wrong = {name: length for name, length in lengths.items() if length != steps}
    if wrong:
        raise ValueError(f"{steps + 1} observations (a reset and {steps} steps) need "
                         f"{steps} actions, rewards and extra_model_outputs and "
                         f"{steps + 1} infos; got {wrong} (beyond those of the reset: infos)")
    last = {"terminateds": terminateds, "truncateds": truncateds}
    last = {name: {ALL: flags} if isinstance(flags, bool) else dict(flags)
            for name, flags in last.items()}
    if not steps and any(any(flags.values()) for flags in last.values()):
        raise ValueError("terminateds/truncateds are the last step's flags, but only a reset "
                         "observation was given")
    episode.add_env_reset(observations[0], infos[0] if infos else None)
    for step in range(steps):
        final = step == steps - 1
        episode.add_env_step(
            observations[step + 1], actions[step], rewards[step],
            infos[step + 1] if infos else None,
            terminateds=last["terminateds"] if final else None,
            truncateds=last["truncateds"] if final else None,
            extra_model_outputs=extra_model_outputs[step] if extra_model_outputs else None,
        )
