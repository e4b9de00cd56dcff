"""Playing a batch policy in gymnasium envs stepped side by side, episode by episode.

Examples:
    >>> import numpy as np
    >>> envs = [make_env("CartPole-v1") for _ in range(2)]
    >>> policy = lambda obs: (np.zeros(len(obs), dtype=np.int64), {})
    >>> episodes = list(rollout(envs, policy, 3, seed=0))
    >>> len(episodes), all(episode.is_done for episode in episodes)
    (3, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError, EnvError, OfflineRLError
from offline_rl.evaluation.env_limits import EpisodeLimits, env_reset, env_step

EnvSpec = str | Callable[[dict], gym.Env]
#: ``obs_batch -> (actions, extra model outputs)``, one row of each per observation.
BatchPolicy = Callable[[np.ndarray], tuple[np.ndarray, dict[str, np.ndarray]]]


def make_env(env: EnvSpec, env_config: dict[str, Any] | None = None) -> gym.Env:
    """A gymnasium id (``gym.make(id, **env_config)``) or a creator ``env_config -> env``.

    Examples:
        >>> make_env("CartPole-v1").action_space
        Discrete(2)
    """
    if isinstance(env, str):
        return gym.make(env, **(env_config or {}))
    name = getattr(env, "__qualname__", type(env).__qualname__)
    try:
        created = env(env_config or {})
    except OfflineRLError:
        raise
    except Exception as error:
        raise EnvError(f"the env creator {name}(env_config={env_config or {}!r}) raised "
                       f"{type(error).__name__}: {error}; fix the creator or its env_config (the "
                       "error is this one's cause)") from error
    if not isinstance(created, gym.Env):
        raise ConfigError(f"the env creator {name} returned {type(created).__name__}, not a "
                          "gymnasium.Env; return the env itself")
    return created


def env_action(action: Any, space: gym.Space) -> Any:
    """``action`` as ``space``'s env takes it: a python ``int`` for ``Discrete``, clipped to the
    bounds for ``Box``, a python scalar for other 0-d actions, else unchanged.

    Examples:
        >>> env_action(np.int64(1), gym.spaces.Discrete(2))
        1
        >>> env_action(np.array([3.0]), gym.spaces.Box(-2.0, 2.0, (1,)))
        array([2.])
    """
    if isinstance(space, gym.spaces.Discrete):
        return int(action)
    if isinstance(space, gym.spaces.Box):
        return np.clip(action, space.low, space.high)
    action = np.asarray(action)
    return action.item() if action.ndim == 0 else action


def rollout(envs: Sequence[gym.Env], policy: BatchPolicy, num_episodes: int, *,
            seed: int | None = None, on_episode_start: Callable[[int], None] | None = None,
            limits: EpisodeLimits | None = None, max_steps: int | None = None
            ) -> Iterator[SingleAgentEpisode]:
    """Yields ``num_episodes`` complete episodes as they finish, stepping ``envs`` side by side.
    With ``max_steps`` it stops after that many env steps in all: the episodes still running
    then are yielded cut, ending truncated (an episode not stepped yet is dropped).

    Episode ``i`` is reset with ``seed + i``; ``on_episode_start(i)`` runs first (e.g. to pick a
    sub-policy per episode). Each env gets ``env_action`` of the policy's action; the episode
    keeps the policy's own action (as sampled, unclipped), as RLlib records it. Infos are kept;
    done flags are numpy bools, as RLlib's vectorized env runners store them. The envs stay
    open: the caller owns them. ``limits`` (``EpisodeLimits``; by default the env spec's
    ``max_episode_steps`` and no timeout) cuts episodes at their cap and counts them, raises
    ``EnvError`` for an episode past its timeout and for an error the env raises.
    """
    limits = EpisodeLimits() if limits is None else limits
    running: dict[int, SingleAgentEpisode] = {}
    numbers: dict[int, int] = {}
    begun: dict[int, float] = {}
    started = taken = 0

    def start(slot: int) -> None:
        nonlocal started
        if on_episode_start is not None:
            on_episode_start(started)
        obs, info = env_reset(envs[slot], None if seed is None else seed + started, limits,
                              episode=started)
        running[slot] = SingleAgentEpisode(
            observations=[obs], infos=[info], observation_space=envs[slot].observation_space,
            action_space=envs[slot].action_space, len_lookback_buffer=0)
        numbers[slot], begun[slot] = started, time.monotonic()
        started += 1

    for slot in range(min(len(envs), num_episodes)):
        start(slot)
    while running:
        slots = list(running)[:None if max_steps is None else max_steps - taken]
        actions, extras = policy(np.stack([running[s].get_observations(-1) for s in slots]))
        for row, slot in enumerate(slots):
            episode, env = running[slot], envs[slot]
            obs, reward, terminated, truncated, info = env_step(
                env, env_action(actions[row], env.action_space), limits,
                episode=numbers[slot], steps=len(episode))
            truncated = truncated or limits.cuts(env, len(episode) + 1,
                                                 bool(terminated or truncated))
            episode.add_env_step(obs, actions[row], float(reward),
                                 terminated=np.bool_(terminated), truncated=np.bool_(truncated),
                                 infos=info,
                                 extra_model_outputs={k: v[row] for k, v in extras.items()})
            taken += 1
            if episode.is_done:
                del running[slot]
                yield episode.to_numpy()
                if started < num_episodes and (max_steps is None or taken < max_steps):
                    start(slot)
            else:
                limits.check_time(env, begun[slot], len(episode), numbers[slot])
        if max_steps is not None and taken >= max_steps:
            for episode in running.values():
                if len(episode):
                    episode.is_truncated = np.bool_(True)
                    yield episode.to_numpy()
            return
