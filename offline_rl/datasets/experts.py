"""Scripted experts and seeded behaviour policies of known quality, for reference datasets.

``behaviour_policy(env_id, tier, seed)`` gives a policy for one of four envs (``EXPERTS``) and four
quality tiers (``TIERS``). Call ``policy.start_episode()`` at every env reset, then
``policy(obs)`` each step for ``(action, action_logp, action_dist_inputs)``: the action to take,
the exact log-probability the behaviour policy gave it, and the distribution's parameters as
float32 (log-probabilities of all actions if discrete, ``[mean, log_std]`` if continuous).
Policies are deterministic given the seed. ``EXPECTED_RETURNS`` holds the measured return bands.

The discrete ``medium`` tiers are systematically suboptimal, as a D4RL ``medium`` policy is: the
expert with a ``Flaw`` (``FLAWS``) that makes a wrong action the most likely one in some states,
so that imitation copies the flaw and only the rewards tell which of the logged actions is better.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import NamedTuple

import gymnasium as gym
import numpy as np

from offline_rl.errors import ConfigError
from offline_rl.reference_datasets import EXPERT_ENVS, TIERS

Action = int | np.ndarray
Seed = int | np.random.SeedSequence

#: Gains of a linear controller on CartPole's (x, x_dot, theta, theta_dot): push right when the
#: weighted state is positive. Holds the pole for all 500 steps, also with 20% random actions.
CARTPOLE_GAINS = np.array([0.1, 0.5, 10.0, 2.0])

#: MountainCar's starting position (at rest) right of which the car first swings back to the left.
MOUNTAINCAR_SWING_LEFT_FROM = -0.485
#: A MountainCar speed above any the car reaches by rolling from a start (at rest in [-0.6, -0.4])
#: without pushing: at most 0.0106, from -0.4.
MOUNTAINCAR_SLOW = 0.011


def cartpole_expert(obs: np.ndarray) -> int:
    """The CartPole-v1 expert's action for one observation."""
    return int(np.dot(CARTPOLE_GAINS, obs) > 0)


def acrobot_expert(obs: np.ndarray) -> int:
    """Acrobot-v1: pumps energy with full torque (action 0: -1, 2: +1) on the second joint in the
    direction of its angular velocity relative to 0.6 times the first link's."""
    return 2 if obs[5] - 0.6 * obs[4] > 0 else 0


def mountaincar_expert(obs: np.ndarray) -> int:
    """MountainCar-v0: pushes (action 0: left, 2: right) in the direction of the velocity; at rest
    it swings left first, unless it starts left of ``MOUNTAINCAR_SWING_LEFT_FROM``."""
    position, velocity = obs
    if velocity == 0.0:
        return 0 if position > MOUNTAINCAR_SWING_LEFT_FROM else 2
    return 2 if velocity > 0 else 0


def pendulum_expert(obs: np.ndarray) -> np.ndarray:
    """Pendulum-v1: a PD controller balances near the top (cos > 0.9); elsewhere energy control.

    With angular acceleration 15 sin(theta) + 3 u, the energy E = speed**2 / 2 + 15 (cos - 1)
    (0 upright at rest) changes at 3 u speed, so u = -E speed drives E to 0: the swing-up.
    """
    cos, sin, speed = (float(x) for x in obs)
    if cos > 0.9:
        torque = -10.0 * math.atan2(sin, cos) - 2.0 * speed
    else:
        torque = -(0.5 * speed**2 + 15.0 * (cos - 1.0)) * speed
    return np.clip([torque], -2.0, 2.0).astype(np.float32)


#: Expert per gymnasium env id (``EXPERT_ENVS``, in that order).
EXPERTS: dict[str, Callable[[np.ndarray], Action]] = dict(zip(
    EXPERT_ENVS, (cartpole_expert, acrobot_expert, mountaincar_expert, pendulum_expert),
    strict=True))

#: Action space per env id (as the env declares it).
ACTION_SPACES: dict[str, gym.spaces.Discrete | gym.spaces.Box] = {
    "CartPole-v1": gym.spaces.Discrete(2),
    "Acrobot-v1": gym.spaces.Discrete(3),
    "MountainCar-v0": gym.spaces.Discrete(3),
    "Pendulum-v1": gym.spaces.Box(-2.0, 2.0, (1,), np.float32),
}

#: Noise of the ``medium`` and ``expert`` tiers around the expert: the probability of a uniformly
#: random action (discrete; the ``medium`` tiers add their ``FLAWS``), or the Gaussian's standard
#: deviation (continuous).
NOISE: dict[str, dict[str, float]] = {
    "CartPole-v1": {"medium": 0.05, "expert": 0.05},
    "Acrobot-v1": {"medium": 0.05, "expert": 0.05},
    "MountainCar-v0": {"medium": 0.05, "expert": 0.05},
    "Pendulum-v1": {"medium": 3.0, "expert": 0.1},
}

#: Mean episode return per env and tier, as ``(low, high)`` bands for the mean over 20 or more
#: episodes (env reset seeds ``seed + episode``): the average over 30 seeds of 20-episode means,
#: plus and minus 3.5 of their standard deviations (rounded outwards, clipped to what is possible).
EXPECTED_RETURNS: dict[str, dict[str, tuple[float, float]]] = {
    "CartPole-v1": {"random": (13, 30), "medium": (218, 432), "expert": (475, 500),
                    "mixed": (109, 447)},
    "Acrobot-v1": {"random": (-500, -490), "medium": (-214, -139), "expert": (-105, -70),
                   "mixed": (-391, -131)},
    "MountainCar-v0": {"random": (-200, -200), "medium": (-188, -162), "expert": (-140, -100),
                       "mixed": (-191, -138)},
    "Pendulum-v1": {"random": (-1410, -1040), "medium": (-760, -590), "expert": (-225, -75),
                    "mixed": (-1050, -315)},
}


class BehaviourPolicy(ABC):
    """Interface of the behaviour policies: ``policy(obs) -> (action, action_logp,
    action_dist_inputs)``, and ``start_episode()`` to call at every env reset."""

    def start_episode(self) -> None:
        """Called at every env reset; only a per-episode mixture uses it."""

    @abstractmethod
    def __call__(self, obs: np.ndarray) -> tuple[Action, float, np.ndarray]:
        """The action for ``obs``, its log-probability and the distribution's inputs."""


class Flaw(NamedTuple):
    """A systematic error of a discrete policy: where the expert would take ``action`` (any
    action if None) and ``where(obs)`` holds (if given), take ``replacement`` instead with
    ``probability``."""

    action: int | None
    replacement: int
    probability: float
    where: Callable[[np.ndarray], bool] | None = None

    def applies(self, greedy: int, obs: np.ndarray) -> bool:
        """Whether the flaw replaces the expert's action ``greedy`` at ``obs``."""
        return self.action in (None, greedy) and (self.where is None or self.where(obs))


def pole_turning_right(obs: np.ndarray) -> bool:
    """CartPole: the pole's angular velocity is positive."""
    return bool(obs[3] > 0)


def moving_slowly(obs: np.ndarray) -> bool:
    """MountainCar: the car is slower than ``MOUNTAINCAR_SLOW``."""
    return bool(abs(obs[1]) < MOUNTAINCAR_SLOW)


#: The flaw of each discrete ``medium`` tier. CartPole: while the pole turns right, it never pushes
#: left (the expert would, to catch the pole early). Acrobot: instead of torque +1 it applies -1
#: with probability 0.55. MountainCar: while the car is slow, it coasts with probability 0.8, so
#: it takes long to swing up, and a policy that always coasts there never does. Each makes the
#: replacement the most likely action where it applies.
FLAWS: dict[str, Flaw] = {
    "CartPole-v1": Flaw(0, 1, 1.0, pole_turning_right),
    "Acrobot-v1": Flaw(2, 0, 0.55),
    "MountainCar-v0": Flaw(None, 1, 0.8, moving_slowly),
}


class EpsilonGreedy(BehaviourPolicy):
    """Takes the expert's action, or with probability ``epsilon`` a uniformly random one (which
    may be the expert's too): each action has probability ``epsilon / num_actions``, plus
    ``1 - epsilon`` for the expert's. With a ``flaw`` that applies, a share ``flaw.probability``
    of that ``1 - epsilon`` goes to ``flaw.replacement`` instead. ``action_dist_inputs`` are the
    log-probabilities of all actions (``-inf`` for those it never takes).

    Examples:
        >>> import numpy as np
        >>> policy = EpsilonGreedy(cartpole_expert, num_actions=2, epsilon=0.1, seed=0)
        >>> action, logp, dist_inputs = policy(np.array([0.0, 0.0, 0.1, 0.0]))
        >>> action, round(logp, 4), [round(float(p), 2) for p in np.exp(dist_inputs)]
        (1, -0.0513, [0.05, 0.95])
    """

    def __init__(self, expert: Callable[[np.ndarray], int], num_actions: int, epsilon: float,
                 seed: Seed, flaw: Flaw | None = None):
        if not 0.0 <= epsilon <= 1.0:
            raise ConfigError(f"epsilon must be in [0, 1], got {epsilon}")
        if flaw is not None and not 0.0 <= flaw.probability <= 1.0:
            raise ConfigError(f"a flaw's probability must be in [0, 1], got {flaw.probability}")
        self.expert = expert
        self.num_actions = num_actions
        self.epsilon = epsilon
        self.flaw = flaw
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray) -> tuple[int, float, np.ndarray]:
        """(action, its log-probability, log-probabilities of every action as float32)."""
        greedy = self.expert(obs)
        probs = np.full(self.num_actions, self.epsilon / self.num_actions)
        intended = 1.0 - self.epsilon
        replaced = self.flaw is not None and self.flaw.applies(greedy, obs)
        if replaced:
            probs[self.flaw.replacement] += intended * self.flaw.probability
            intended *= 1.0 - self.flaw.probability
        probs[greedy] += intended
        if self.rng.random() < self.epsilon:
            action = int(self.rng.integers(self.num_actions))
        elif replaced and self.rng.random() < self.flaw.probability:
            action = self.flaw.replacement
        else:
            action = greedy
        with np.errstate(divide="ignore"):
            logps = np.log(probs).astype(np.float32)
        return action, float(logps[action]), logps


class GaussianNoise(BehaviourPolicy):
    """Samples a Gaussian with mean ``expert(obs)`` (or the centre of the box if ``expert`` is
    None) and standard deviation ``std``, then clips the sample to ``[low, high]``. As in RLlib,
    ``action_logp`` is the Gaussian log-density of the sample *before* clipping (so it is exact
    for the unclipped actions); ``action_dist_inputs`` are ``[mean, log_std]`` as float32.

    Examples:
        >>> import numpy as np
        >>> policy = GaussianNoise(pendulum_expert, std=0.1, low=-2.0, high=2.0, seed=0)
        >>> action, logp, dist_inputs = policy(np.array([0.995, 0.1, 0.0]))
        >>> round(float(action[0]), 3), round(logp, 3), [round(float(x), 3) for x in dist_inputs]
        (-0.989, 1.376, [-1.002, -2.303])
    """

    def __init__(self, expert: Callable[[np.ndarray], np.ndarray] | None, std: float,
                 low: float | np.ndarray, high: float | np.ndarray, seed: Seed):
        if not std > 0:
            raise ConfigError(f"std must be positive, got {std}")
        self.expert = expert
        self.std = std
        self.low = np.asarray(low, dtype=np.float32)
        self.high = np.asarray(high, dtype=np.float32)
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        """(clipped action, log-density of the unclipped sample, ``[mean, log_std]``)."""
        centre = (self.low + self.high) / 2
        mean = np.atleast_1d(centre if self.expert is None else self.expert(obs)).astype(float)
        noise = self.rng.standard_normal(mean.shape)
        action = np.clip(mean + self.std * noise, self.low, self.high).astype(np.float32)
        logp = float(np.sum(-0.5 * noise**2 - math.log(self.std) - 0.5 * math.log(2 * math.pi)))
        log_std = np.full(mean.shape, math.log(self.std))
        return action, logp, np.concatenate([mean, log_std]).astype(np.float32)


class PerEpisodeMixture(BehaviourPolicy):
    """Acts with one of ``policies`` per episode, chosen uniformly at ``start_episode()``; its
    name is ``current``. ``action_logp`` is that policy's, i.e. given the episode's choice.

    Examples:
        >>> import numpy as np
        >>> policy = behaviour_policy("CartPole-v1", "mixed", seed=0)
        >>> policy.start_episode()
        >>> policy.current, policy(np.zeros(4))[0]
        ('expert', 0)
    """

    def __init__(self, policies: dict[str, BehaviourPolicy], seed: Seed):
        self.policies = policies
        self.rng = np.random.default_rng(seed)
        self.current: str | None = None

    def start_episode(self) -> None:
        """Picks the policy for the episode starting now."""
        names = list(self.policies)
        self.current = names[self.rng.integers(len(names))]
        self.policies[self.current].start_episode()

    def __call__(self, obs: np.ndarray) -> tuple[Action, float, np.ndarray]:
        if self.current is None:
            raise RuntimeError("call start_episode() at every env reset before acting")
        return self.policies[self.current](obs)


def behaviour_policy(env_id: str, tier: str, seed: int) -> BehaviourPolicy:
    """The behaviour policy of ``tier`` (see ``TIERS``) for ``env_id`` (see ``EXPERTS``).

    ``random``: uniform actions (continuous: a Gaussian around the box's centre with half its
    width as std, clipped); ``medium``/``expert``: the expert with ``NOISE[env_id][tier]`` (and,
    for a discrete ``medium``, ``FLAWS[env_id]``);
    ``mixed``: one of those three per episode, chosen at ``start_episode()``.
    """
    if env_id not in EXPERTS:
        raise ConfigError(f"no scripted expert for {env_id!r}; available: {sorted(EXPERTS)}")
    if tier not in TIERS:
        raise ConfigError(f"unknown tier {tier!r}; available: {list(TIERS)}")
    if tier != "mixed":
        return _single_tier_policy(env_id, tier, seed)
    mixture_seed, *seeds = np.random.SeedSequence(seed).spawn(4)
    return PerEpisodeMixture({name: _single_tier_policy(env_id, name, child)
                              for name, child in zip(TIERS[:3], seeds)}, mixture_seed)


def _single_tier_policy(env_id: str, tier: str, seed: Seed) -> BehaviourPolicy:
    expert, space = EXPERTS[env_id], ACTION_SPACES[env_id]
    if isinstance(space, gym.spaces.Discrete):
        epsilon = 1.0 if tier == "random" else NOISE[env_id][tier]
        flaw = FLAWS[env_id] if tier == "medium" else None
        return EpsilonGreedy(expert, int(space.n), epsilon, seed, flaw)
    if tier == "random":
        return GaussianNoise(None, float(np.max(space.high - space.low)) / 2, space.low,
                             space.high, seed)
    return GaussianNoise(expert, NOISE[env_id][tier], space.low, space.high, seed)
