"""Playing a user's env, safely: how long its episodes may run, its errors as ``EnvError``, and
its spaces held against the data's. One implementation for every player: the sampler, the
evaluation runners and the recorders (``rollout`` and ``multi_agent_rollout`` call it).

- An episode that reaches ``max_episode_steps`` (the configured cap, else the env spec's,
  gymnasium's ``TimeLimit``) is cut there: it ends truncated, as ``TimeLimit`` ends it, and
  the players count the cut episodes and say so.
- An episode that runs ``timeout_s`` seconds without ending raises ``EnvError``: its env may
  never end its episodes (no cap to cut them), so nothing the player waits for would come.
- An error the env raises in ``reset()`` or ``step()`` is raised as an ``EnvError`` that names
  the env, the player, the episode and the step, the env's own error as its ``__cause__``.

Examples:
    >>> import gymnasium as gym
    >>> limits = EpisodeLimits(max_episode_steps=5, player="the sampler's env runner 0")
    >>> env = gym.make("CartPole-v1")
    >>> _ = env.reset(seed=0)
    >>> limits.cap(env), EpisodeLimits().cap(env), env_name(env)
    (5, 500, 'CartPole-v1')
    >>> try:
    ...     env_step(env, 2, limits, episode=0, steps=3)
    ... except EnvError as error:
    ...     print(str(error)[:96])
    env 'CartPole-v1' raised AssertionError: 2 (<class 'int'>) invalid in step() after 3 step(s) of
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.errors import ConfigError, EnvError, OfflineRLError, warn_at_caller
from offline_rl.formats.checks import same_kind


def env_name(env: Any) -> str:
    """The env as messages name it: its gymnasium id, else its class."""
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return spec.id
    unwrapped = getattr(env, "unwrapped", env)
    return f"{type(unwrapped).__module__}.{type(unwrapped).__qualname__}"


@dataclass
class EpisodeLimits:
    """How long a player's episodes may run, and who plays (named in the messages).

    ``max_episode_steps``: the cap (``None``: the env spec's, where it has one);
    ``timeout_s``: the seconds an episode may run without ending (``None``: no limit), set
    with ``timeout_option``. ``episodes_cut`` counts the episodes cut so far, and
    ``cut_notice`` says so (``take_cut`` hands both over and starts counting again).
    """

    max_episode_steps: int | None = None
    timeout_s: float | None = None
    timeout_option: str = "env_runners(sample_timeout_s=...)"
    player: str = "an env runner"
    #: Whether the player cuts episodes at ``max_episode_steps`` (multi-agent ones do not).
    cuts_episodes: bool = True
    episodes_cut: int = 0
    cut_notice: str | None = field(default=None, repr=False)

    def cap(self, env: Any) -> int | None:
        """The steps at which an episode of ``env`` is cut (``None``: never)."""
        if self.max_episode_steps is not None:
            return self.max_episode_steps
        spec = getattr(env, "spec", None)
        return getattr(spec, "max_episode_steps", None)

    def cuts(self, env: Any, steps: int, done: bool) -> bool:
        """Whether an episode of ``env`` that has ``steps`` steps and is not ``done`` is cut
        now (counted)."""
        cap = self.cap(env)
        if done or cap is None or steps < cap:
            return False
        self.episodes_cut += 1
        self.cut_notice = (
            f"{self.player}: episodes of env {env_name(env)!r} that reach max_episode_steps="
            f"{cap} are cut there (they end truncated, as gymnasium's TimeLimit ends them); "
            "set config.env_runners(max_episode_steps=...) to change where")
        return True

    def take_cut(self) -> tuple[int, str | None]:
        """The episodes cut since the last call and what to say about them."""
        taken = self.episodes_cut, self.cut_notice
        self.episodes_cut, self.cut_notice = 0, None
        return taken

    def check_time(self, env: Any, started: float, steps: int, episode: int) -> None:
        """Raises ``EnvError`` when an episode of ``env`` begun at ``started``
        (``time.monotonic()``) has run ``timeout_s`` without ending."""
        if self.timeout_s is None:
            return
        elapsed = time.monotonic() - started
        if elapsed <= self.timeout_s:
            return
        remedy = ("Cut them with config.env_runners(max_episode_steps=...)"
                  if self.cuts_episodes
                  else "Make the env end them (multi-agent episodes are not cut)")
        raise EnvError(
            f"{self.player}: episode {episode} of env {env_name(env)!r} ran {elapsed:.1f} s "
            f"({steps} steps) without ending, over the limit of {self.timeout_s:g} s "
            f"({self.timeout_option}): does the env ever end its episodes (terminated or "
            f"truncated)? {remedy}, or, for episodes that are only slow, raise "
            f"{self.timeout_option} (None: no limit)")


def evaluation_limits(sections: Any, player: str = "evaluate()") -> EpisodeLimits:
    """The limits of ``evaluate()``'s greedy episodes under a config's ``sections``:
    ``env_runners.max_episode_steps`` and ``evaluation.evaluation_sample_timeout_s``."""
    return EpisodeLimits(sections.env_runners.max_episode_steps,
                         sections.evaluation.evaluation_sample_timeout_s,
                         "evaluation(evaluation_sample_timeout_s=...)", player)


def sampling_limits(env_runners: Any, player: str) -> EpisodeLimits:
    """The limits of the sampler's and the recorders' env runners (an ``env_runners``
    section): ``max_episode_steps`` and ``sample_timeout_s``."""
    return EpisodeLimits(env_runners.max_episode_steps, env_runners.sample_timeout_s,
                         "env_runners(sample_timeout_s=...)", player)


def warn_cut(notice: str | None) -> None:
    """Shows a player's ``cut_notice`` (if any) as a warning at the user's line."""
    if notice:
        warn_at_caller(notice)


def env_reset(env: Any, seed: int | None, limits: EpisodeLimits, *, episode: int) -> Any:
    """``env.reset(seed=seed)``; ``EnvError`` (see ``env_error``) when it raises."""
    try:
        return env.reset(seed=seed)
    except OfflineRLError:
        raise
    except Exception as error:
        raise env_error(env, "reset()", error, limits, episode, 0) from error


def env_step(env: Any, action: Any, limits: EpisodeLimits, *, episode: int, steps: int
             ) -> Any:
    """``env.step(action)`` in episode ``episode`` after ``steps`` steps; ``EnvError`` (see
    ``env_error``) when it raises."""
    try:
        return env.step(action)
    except OfflineRLError:
        raise
    except Exception as error:
        raise env_error(env, "step()", error, limits, episode, steps, action) from error


def env_error(env: Any, call: str, error: Exception, limits: EpisodeLimits, episode: int,
              steps: int, action: Any = None) -> EnvError:
    """The ``EnvError`` of ``error``, raised by ``env`` in ``call``: the env, the player, the
    episode and the step; for an action outside the env's action space, that too."""
    hint = ""
    space = getattr(env, "action_space", None)
    if (call == "step()" and isinstance(space, gym.Space) and not isinstance(action, dict)
            and not _contains(space, action)):
        hint = (f"; the action {action!r} is not in the env's action space {space}: was the "
                "policy built for other spaces (config.environment(action_space=...))?")
    return EnvError(
        f"env {env_name(env)!r} raised {type(error).__name__}: {error} in {call} after "
        f"{steps} step(s) of episode {episode}, played by {limits.player}{hint}. The error "
        "is the env's own (its traceback is this error's cause): fix the env or its "
        "env_config")


def check_env_spaces(env: Any, configured: tuple[gym.Space | None, gym.Space | None]) -> None:
    """Raises ``ConfigError`` unless ``configured`` (the data's spaces, set with
    ``config.environment(observation_space=..., action_space=...)``) are of the kind of
    ``env``'s (``formats.checks.same_kind``, and a ``Box``'s dtype; ``None``: not set, not
    checked): the policy is built for the configured ones and would act in an env that takes
    others. An action ``Box`` with other bounds than the env's is refused too (the policy scales
    its actions to the configured bounds); an observation ``Box`` with other bounds is warned
    of (observations are checked against the configured ones).

    Examples:
        >>> env = gym.make("CartPole-v1")
        >>> try:
        ...     check_env_spaces(env, (None, gym.spaces.Discrete(3)))
        ... except ConfigError as error:
        ...     print(str(error)[:89])
        config.environment(action_space=Discrete(3)) is not the action space of env 'CartPole-v1'
    """
    own = (env.observation_space, env.action_space)
    for kind, space, env_space in zip(("observation", "action"), configured, own):
        if space is None:
            continue
        if not same_kind(space, env_space) or getattr(space, "dtype", None) != getattr(
                env_space, "dtype", None):
            raise ConfigError(
                f"config.environment({kind}_space={space}) is not the {kind} space of env "
                f"{env_name(env)!r}, {env_space}: the policy is built for the data's spaces "
                "and would act in an env that takes others. Set env= to the env the data was "
                f"recorded in, or drop {kind}_space= to take the env's")
        if not isinstance(space, gym.spaces.Box) or (
                np.array_equal(space.low, env_space.low)
                and np.array_equal(space.high, env_space.high)):
            continue
        bounds = (f"config.environment({kind}_space={space}) has the bounds low={space.low}, "
                  f"high={space.high}, but the {kind} space of env {env_name(env)!r} has "
                  f"low={env_space.low}, high={env_space.high}")
        if kind == "action":
            raise ConfigError(
                f"{bounds}: the policy scales its actions to the configured bounds, so in the "
                "env they would mean other actions. Set action_space= to the env's bounds, or "
                "drop it to take the env's")
        warn_at_caller(f"{bounds}; observations are checked against the configured bounds "
                       "(input_obs_bounds), and the policy sees them as the env gives them. "
                       "Drop observation_space= to take the env's")


def _contains(space: gym.Space, action: Any) -> bool:
    try:
        return bool(space.contains(action))
    except Exception:  # an action of another type altogether: not in the space
        return False
