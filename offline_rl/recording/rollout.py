"""Playing a policy in gymnasium envs and collecting complete ``SingleAgentEpisode``s.

A policy is anything ``as_batch_policy`` accepts: a trained ``Algorithm`` or torch module
(sampled, with ``action_logp`` and ``action_dist_inputs`` recorded; a checkpoint's module comes
from ``offline_rl.algorithms.checkpoint.load_module``), or a callable ``obs_batch -> actions``
that may also return ``(actions, {"action_logp": ..., "action_dist_inputs": ...})``.

Example:
    >>> import numpy as np
    >>> policy = as_batch_policy(lambda obs: np.zeros(len(obs), dtype=np.int64))
    >>> episodes = list(rollout("CartPole-v1", None, policy, 3, num_envs=2, seed=0))
    >>> len(episodes), all(episode.is_done for episode in episodes)
    (3, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from offline_rl.columns import Columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.evaluation.env_evaluation import EnvSpec, make_env

BatchPolicy = Callable[[np.ndarray], tuple[np.ndarray, dict[str, np.ndarray]]]


def as_batch_policy(policy: Any) -> BatchPolicy:
    """Any supported policy -> ``obs_batch -> (actions, extra model outputs)``."""
    module = getattr(policy, "module", policy)
    if hasattr(module, "forward_exploration"):
        return _ModulePolicy(module)
    if not callable(policy):
        raise TypeError(f"cannot record with a {type(policy).__name__}: give an Algorithm, a "
                        "module (a checkpoint's: offline_rl.algorithms.checkpoint.load_module) "
                        "or a callable obs_batch -> actions")
    return _CallablePolicy(policy)


class _CallablePolicy:
    def __init__(self, function: Callable[[np.ndarray], Any]):
        self.function = function

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        output = self.function(obs)
        actions, extras = output if isinstance(output, tuple) else (output, {})
        return np.asarray(actions), {key: np.asarray(value) for key, value in extras.items()}


class _ModulePolicy:
    """Samples a torch module's action distribution, recording its inputs and log-probs."""

    def __init__(self, module: Any):
        self.module = module

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        import torch

        with torch.no_grad():
            obs_tensor = torch.as_tensor(obs, dtype=torch.float32)
            inputs = self.module.forward_exploration({Columns.OBS: obs_tensor})[
                Columns.ACTION_DIST_INPUTS]
            dist = self.module.get_train_action_dist_cls().from_logits(inputs)
            actions = dist.sample()
            return actions.numpy(), {Columns.ACTION_LOGP: dist.logp(actions).numpy(),
                                     Columns.ACTION_DIST_INPUTS: inputs.numpy()}


def rollout(env: EnvSpec, env_config: dict[str, Any] | None, policy: BatchPolicy,
            num_episodes: int, *, num_envs: int = 1, seed: int | None = None,
            on_episode_start: Callable[[int], None] | None = None
            ) -> Iterator[SingleAgentEpisode]:
    """Yields ``num_episodes`` complete episodes as they finish, stepping ``num_envs`` envs
    side by side. Episode ``i`` is reset with ``seed + i``; ``on_episode_start(i)`` runs first
    (e.g. to pick a sub-policy per episode). Infos are kept; done flags are numpy bools, as
    RLlib's vectorized env runners store them. Envs are closed at the end."""
    envs = [make_env(env, env_config) for _ in range(min(num_envs, num_episodes))]
    running: dict[int, SingleAgentEpisode] = {}
    started = 0

    def start(slot: int) -> None:
        nonlocal started
        if on_episode_start is not None:
            on_episode_start(started)
        obs, info = envs[slot].reset(seed=None if seed is None else seed + started)
        running[slot] = SingleAgentEpisode(
            observations=[obs], infos=[info], observation_space=envs[slot].observation_space,
            action_space=envs[slot].action_space, len_lookback_buffer=0)
        started += 1

    try:
        for slot in range(len(envs)):
            start(slot)
        while running:
            slots = list(running)
            actions, extras = policy(np.stack([running[s].get_observations(-1) for s in slots]))
            for row, slot in enumerate(slots):
                episode = running[slot]
                obs, reward, terminated, truncated, info = envs[slot].step(_to_env(actions[row]))
                episode.add_env_step(obs, actions[row], float(reward),
                                     terminated=np.bool_(terminated),
                                     truncated=np.bool_(truncated), infos=info,
                                     extra_model_outputs={k: v[row] for k, v in extras.items()})
                if episode.is_done:
                    del running[slot]
                    yield episode.to_numpy()
                    if started < num_episodes:
                        start(slot)
    finally:
        for instance in envs:
            instance.close()


def _to_env(action: np.ndarray) -> Any:
    return action.item() if action.ndim == 0 else action
