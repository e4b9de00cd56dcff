"""``SampleBatch`` and ``MultiAgentBatch``: RLlib's batches of columns, plain and per module.

A custom PreLearner's ``__call__`` may return ``{"batch": MultiAgentBatch(...)}`` as RLlib's
do; offline-rl's pipeline takes the one module's ``SampleBatch`` out of it
(``offline_rl.data.prelearner.call_output``).

Examples:
    >>> import numpy as np
    >>> batch = MultiAgentBatch({"default_policy": SampleBatch({"rewards": np.ones(3)})},
    ...                         env_steps=3)
    >>> batch.count, batch.env_steps(), batch.agent_steps(), list(batch.policy_batches)
    (3, 3, 3, ['default_policy'])
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from offline_rl.names import ModuleID


class SampleBatch(dict[str, Any]):
    """Columns of equal length (one row per step), as RLlib's old-stack ``SampleBatch``.

    Examples:
        >>> import numpy as np
        >>> SampleBatch({"rewards": np.array([1.0, 0.0])}).count
        2
    """

    @property
    def count(self) -> int:
        """Rows in the batch."""
        return len(next(iter(self.values()))) if self else 0

    def split_by_episode(self) -> list[SampleBatch]:
        """The batch cut into one batch per episode: where ``eps_id`` changes, or else after
        each row whose ``terminateds``, ``truncateds`` or ``dones`` is set.

        Examples:
            >>> import numpy as np
            >>> batch = SampleBatch({"eps_id": np.array([4, 4, 9]), "rewards": np.ones(3)})
            >>> [part["eps_id"].tolist() for part in batch.split_by_episode()]
            [[4, 4], [9]]
        """
        if "eps_id" in self:
            ids = np.asarray(self["eps_id"])
            ends = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        else:
            done = np.zeros(self.count, dtype=bool)
            for name in ("terminateds", "truncateds", "dones"):
                if name in self:
                    done |= np.asarray(self[name], dtype=bool)
            ends = np.flatnonzero(done[:-1]) + 1
        bounds = [0, *ends.tolist(), self.count]
        return [SampleBatch({name: column[start:stop] for name, column in self.items()})
                for start, stop in itertools.pairwise(bounds) if stop > start]


class MultiAgentBatch:
    """One ``SampleBatch`` per module (``policy_batches``) and the environment steps they came
    from, as RLlib's ``MultiAgentBatch``."""

    def __init__(self, policy_batches: Mapping[ModuleID, SampleBatch], env_steps: int):
        self.policy_batches = {module_id: batch if isinstance(batch, SampleBatch)
                               else SampleBatch(batch)
                               for module_id, batch in policy_batches.items()}
        self.count = int(env_steps)

    def env_steps(self) -> int:
        """The environment steps the batch holds."""
        return self.count

    def agent_steps(self) -> int:
        """The rows of all modules' batches together."""
        return sum(batch.count for batch in self.policy_batches.values())

    def __repr__(self) -> str:
        return (f"MultiAgentBatch({ {m: b.count for m, b in self.policy_batches.items()} }, "
                f"env_steps={self.count})")
