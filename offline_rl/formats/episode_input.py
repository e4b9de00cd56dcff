"""Rows of the two episode formats -> ``SingleAgentEpisode``s.

* Episodes format: one binary ``item`` per row, an msgpack-numpy episode state (RLlib's
  ``output_write_episodes=True``), decoded without ever unpickling; a multi-agent episode's
  state gives the episodes of its agents.
* Legacy SampleBatch JSON: one ``{"type": "SampleBatch", ...}`` per row, possibly holding several
  episodes; each is split out by ``eps_id``, ordered by ``t``. Array fields stored as strings are
  compressed arrays (decoded by ``offline_rl.compression``, pickle-free).

Examples:
    >>> import numpy as np
    >>> row = {"type": "SampleBatch", "eps_id": [7, 7, 9], "t": [1, 0, 0],
    ...        "obs": [[1.0], [0.0], [5.0]], "new_obs": [[2.0], [1.0], [6.0]],
    ...        "actions": [1, 0, 1], "rewards": [1.0, 1.0, 0.0], "dones": [True, False, True]}
    >>> [(e.id_, len(e), e.is_terminated) for e in sample_batch_to_episodes(row, "a.json")]
    [('7', 2, True), ('9', 1, True)]
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from offline_rl.codec import unpack_episode_state
from offline_rl.columns import EPISODE_AGENTS, SCHEMA, Columns
from offline_rl.compression import decompress_value
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.multi_agent_episode import MultiAgentEpisode
from offline_rl.errors import DataFormatError
from offline_rl.formats.checks import check_column_types
from offline_rl.formats.episode_rows import as_id, episode_from_rows
from offline_rl.names import DEFAULT_MODULE_ID

#: SampleBatch fields that are bookkeeping of RLlib's old stack, not model outputs.
SAMPLE_BATCH_BOOKKEEPING = frozenset({
    "type", "eps_id", "t", "infos", "dones", "terminateds", "truncateds", "agent_index",
    "unroll_id", "prev_actions", "prev_rewards", "seq_lens", "env_id", "path",
})
_TRANSITION_FIELDS = (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS)


def decode_item(item: bytes, where: str) -> SingleAgentEpisode | MultiAgentEpisode:
    """One ``item`` value -> a finalized episode: a ``SingleAgentEpisode``, or a
    ``MultiAgentEpisode`` for a multi-agent episode's state; errors name ``where``."""
    try:
        state = unpack_episode_state(item, where=where, floats_as_arrays=True)
        kind = MultiAgentEpisode if "agent_episodes" in state else SingleAgentEpisode
        return kind.from_state(state).to_numpy()
    except ValueError as error:
        message = str(error) if str(error).startswith(where) else f"{where}: {error}"
        raise DataFormatError(
            f"{message}. Episodes-format data holds one msgpack episode state per 'item' value, "
            "as written with output_write_episodes=True"
        ) from None


def decode_episode(item: bytes, where: str) -> SingleAgentEpisode:
    """One ``item`` value -> a finalized single-agent episode; a multi-agent episode is a
    ``DataFormatError`` naming ``where`` and its agents (their modules need declaring)."""
    episode = decode_item(item, where)
    if isinstance(episode, MultiAgentEpisode):
        raise DataFormatError(
            f"{where}: multi-agent episode {episode.id_} (agents "
            f"{sorted(map(str, episode.agent_episodes))}), which one module "
            f"({DEFAULT_MODULE_ID!r}) would train on mixed. Declare the modules and which "
            "agent each acts for: config.multi_agent(policies=[...], policy_mapping_fn=...) "
            "(see the guide's 'Multi-agent data')")
    return episode


def decode_multi_agent_episode(item: bytes, where: str) -> MultiAgentEpisode:
    """One ``item`` value -> a finalized multi-agent episode; a single-agent episode is a
    ``DataFormatError`` naming ``where`` (nothing names its agent)."""
    episode = decode_item(item, where)
    if isinstance(episode, SingleAgentEpisode):
        raise DataFormatError(
            f"{where}: single-agent episode {episode.id_} in the input of a multi-agent config: "
            "multi-agent episodes data holds MultiAgentEpisode states, whose agents the "
            "policy_mapping_fn maps to modules; train single-agent episodes without "
            "config.multi_agent")
    return episode


def decode_agent_episodes(item: bytes, where: str, agent_ids: Collection[str],
                          listed: Sequence[Any] | None = None) -> list[SingleAgentEpisode]:
    """The episodes of the agents ``agent_ids`` (as strings) in one ``item`` value holding a
    multi-agent episode's state, in its order. ``listed``: the agents the file's
    ``agent_ids`` column gives for the episode (what its agents were mapped by), which must
    be its agents, else ``DataFormatError`` naming ``where``.

    Examples:
        >>> from offline_rl.codec import pack_multi_agent_episode_state
        >>> episode = MultiAgentEpisode("m", agent_module_ids={0: "cart", 1: "cart"})
        >>> episode.add_env_reset({0: [0.0], 1: [0.5]})
        >>> episode.add_env_step({0: [0.1], 1: [0.6]}, {0: 1, 1: 0}, {0: 1.0, 1: 2.0},
        ...                      terminateds={"__all__": True})
        >>> item = pack_multi_agent_episode_state(episode.get_state())
        >>> [(agent.agent_id, agent.get_return())
        ...  for agent in decode_agent_episodes(item, "a.parquet", ["1"], listed=["0", "1"])]
        [(1, 2.0)]
    """
    episode = decode_multi_agent_episode(item, where)
    agents = sorted(agent_names(episode.agent_episodes, f"{where}: episode {episode.id_}"))
    if listed is not None and sorted(map(str, listed)) != agents:
        raise DataFormatError(
            f"{where}: episode {episode.id_} has the agents {agents}, but the column "
            f"{EPISODE_AGENTS!r} lists {sorted(map(str, listed))} for it; rewrite the file "
            "(the writer fills the column from each episode)")
    wanted = set(agent_ids)
    return [agent_episode for agent_id, agent_episode in episode.agent_episodes.items()
            if str(agent_id) in wanted]


def agent_names(agent_ids: Iterable[Any], where: str,
                seen: dict[str, tuple[Any, str]] | None = None) -> dict[str, Any]:
    """Each agent id as text (how the data's agents are named and mapped) to the id itself;
    ``DataFormatError`` naming both ids and where each was seen when two of them read as one,
    as ``0`` and ``'0'`` do: two ids of ``agent_ids`` (seen in ``where``), or one and an id in
    ``seen`` (text -> (id, where it was seen), updated with those of ``agent_ids``).

    Examples:
        >>> agent_names([0, 1], "a.parquet")
        {'0': 0, '1': 1}
        >>> agent_names([0, "0"], "a.parquet")
        Traceback (most recent call last):
        ...
        offline_rl.errors.DataFormatError: a.parquet: the agent ids 0 (int) and '0' (str) are \
two agents whose ids read as one ('0'), which would be trained on as one agent; give each \
agent an id of its own
        >>> agent_names(["0"], "b.parquet", {"0": (0, "a.parquet")})
        Traceback (most recent call last):
        ...
        offline_rl.errors.DataFormatError: b.parquet: the agent ids 0 (int, in a.parquet) and \
'0' (str) are two agents whose ids read as one ('0'), which would be trained on as one agent; \
give each agent an id of its own
    """
    agent_ids, names = list(agent_ids), {} if seen is None else seen
    for agent in agent_ids:
        other, other_where = names.setdefault(str(agent), (agent, where))
        if other != agent or isinstance(other, str) != isinstance(agent, str):
            elsewhere = "" if other_where == where else f", in {other_where}"
            raise DataFormatError(
                f"{where}: the agent ids {other!r} ({type(other).__name__}{elsewhere}) and "
                f"{agent!r} ({type(agent).__name__}) are two agents whose ids read as one "
                f"({str(agent)!r}), which would be trained on as one agent; give each agent an "
                "id of its own")
    return {str(agent): agent for agent in agent_ids}


def is_multi_agent_batch(row: Mapping[str, Any]) -> bool:
    """Whether a SampleBatch JSON line is an old-stack ``MultiAgentBatch``."""
    return row.get("type") == "MultiAgentBatch" or "policy_batches" in row


def module_sample_batch(row: Mapping[str, Any], module_id: str | None,
                        where: str) -> Mapping[str, Any] | None:
    """The SampleBatch of ``row`` that trains ``module_id`` (a multi-agent config's module):
    its batch of a ``MultiAgentBatch`` line (old-stack policy ids are module ids; ``None``
    when the line holds none), else ``row`` itself for single-agent configs (``module_id``
    ``None``). Raises ``DataFormatError`` naming ``where`` for a single-agent SampleBatch line
    in multi-agent input, whose module nothing names.

    Examples:
        >>> line = {"type": "MultiAgentBatch", "policy_batches": {"a": {"obs": [[0.0]]}}}
        >>> module_sample_batch(line, "a", "x.json"), module_sample_batch(line, "b", "x.json")
        ({'obs': [[0.0]]}, None)
    """
    if module_id is None:
        return row
    if not is_multi_agent_batch(row):
        raise DataFormatError(
            f"{where}: a single-agent SampleBatch line in the input of a multi-agent config "
            f"(module {module_id!r}): old-stack multi-agent data is MultiAgentBatch lines, whose "
            "policy_batches name each module's rows")
    batches = row.get("policy_batches")
    if not isinstance(batches, Mapping):
        raise DataFormatError(f"{where}: a MultiAgentBatch line whose policy_batches is "
                              f"{type(batches).__name__}, not a dict of SampleBatches by policy")
    return batches.get(module_id)


def sample_batch_columns(row: Mapping[str, Any], where: str) -> dict[str, np.ndarray]:
    """One SampleBatch (a dict of equal-length columns, compressed ones as RLlib packs them)
    -> its columns as arrays, ``infos`` left out; ``DataFormatError`` naming ``where`` when a
    transition field is missing, a column holds no numbers or the lengths differ, or the row
    is a multi-agent batch."""
    if is_multi_agent_batch(row):
        policies = row.get("policy_batches")
        raise DataFormatError(
            f"{where}: a MultiAgentBatch line (policies "
            f"{sorted(policies) if isinstance(policies, dict) else '?'}): multi-agent data, "
            f"which one module ({DEFAULT_MODULE_ID!r}) would train on mixed. Declare the "
            "modules (the policy ids): config.multi_agent(policies=[...]) (see the guide's "
            "'Multi-agent data')")
    columns = {name: _array(value, name, where) for name, value in row.items()
               if value is not None and name not in ("type", "path", Columns.INFOS)}
    missing = [name for name in _TRANSITION_FIELDS if name not in columns]
    if missing or (Columns.TERMINATEDS not in columns and "dones" not in columns):
        raise DataFormatError(
            f"{where}: SampleBatch has no {missing or ['terminateds']} field(s) (fields: "
            f"{sorted(row)}); legacy JSON needs obs, new_obs, actions, rewards and "
            "terminateds (or dones)"
        )
    check_column_types(columns, where)
    size = len(columns[Columns.ACTIONS])
    uneven = {name: len(values) for name, values in columns.items() if len(values) != size}
    if uneven:
        raise DataFormatError(f"{where}: SampleBatch fields have different lengths: {uneven} "
                              f"vs {size} actions")
    infos = row.get(Columns.INFOS)
    if infos is not None and not (isinstance(infos, list | tuple | np.ndarray)
                                  and len(infos) == size):
        count = (f"{len(infos)} values" if isinstance(infos, list | tuple | np.ndarray)
                 else f"a {type(infos).__name__}")
        raise DataFormatError(f"{where}: SampleBatch field 'infos' holds {count} for {size} "
                              "actions; it needs a list of one info (a dict) per step, or leave "
                              "it out")
    shapes = {name: columns[name].shape[1:] for name in (Columns.OBS, Columns.NEXT_OBS)}
    if len(set(shapes.values())) > 1:
        raise DataFormatError(f"{where}: SampleBatch fields obs and new_obs hold rows of "
                              f"different shapes: {shapes}")
    return columns


def sample_batch_to_episodes(row: Mapping[str, Any], where: str) -> list[SingleAgentEpisode]:
    """One SampleBatch (a dict of equal-length columns) -> its episodes, split by ``eps_id``
    (in order of first appearance) and ordered by ``t``; done flags come from
    ``terminateds``/``truncateds`` or legacy ``dones``."""
    columns = sample_batch_columns(row, where)
    size = len(columns[Columns.ACTIONS])
    ids = columns.get(Columns.EPS_ID, np.zeros(size, dtype=np.int64))
    steps = columns.get(Columns.T, np.arange(size))
    infos = row.get(Columns.INFOS)
    extras = [name for name in columns if name not in SAMPLE_BATCH_BOOKKEEPING
              and name not in _TRANSITION_FIELDS]
    _, first = np.unique(ids, return_index=True)
    episodes = []
    for eps_id in ids[np.sort(first)]:
        rows = np.flatnonzero(ids == eps_id)
        rows = rows[np.argsort(steps[rows], kind="stable")]
        episodes.append(episode_from_rows(
            {name: values[rows] for name, values in columns.items()}, SCHEMA,
            eps_id=as_id(eps_id), t_started=int(steps[rows[0]]), extras=extras,
            infos=[infos[i] for i in rows] if infos is not None else [{}] * len(rows)))
    return episodes


def _array(value: Any, name: str, where: str) -> np.ndarray:
    if isinstance(value, str | bytes):
        return decompress_value(value, f"{where}, field {name!r}")
    array = np.asarray(value)
    if array.dtype == object:
        raise DataFormatError(f"{where}: field {name!r} is ragged or mixed (rows of different "
                              "shapes or types); every row must hold an array of the same shape")
    return array
