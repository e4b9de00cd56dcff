"""Adds actions, rewards, done flags and extra model outputs from episodes."""

from __future__ import annotations

from functools import partial

from connectors.connector_v2 import ConnectorV2
from offline_rl.columns import Columns
from offline_rl.episodes.transitions import last_step_flags
from offline_rl.formats.composite import is_composite, pack_values


class AddColumnsFromEpisodesToTrainBatch(ConnectorV2):
    """Adds ``actions``, ``rewards``, ``terminateds``, ``truncateds`` and every extra model output
    (e.g. ``action_logp``) for each timestep, skipping columns the batch already has.

    ``Dict``/``Tuple`` actions are packed into one float row each (``pack_values``), which the
    module's composite distribution reads. Only the last timestep of a done episode carries
    ``terminateds``/``truncateds=True``. Infos are not added: they are arbitrary Python objects
    and train batches cross processes as numeric arrays only.

    Examples:
        >>> from offline_rl import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 0.5],
        ...                         terminated=True, len_lookback_buffer=0)
        >>> batch = AddColumnsFromEpisodesToTrainBatch()(rl_module=None, batch={}, episodes=[ep])
        >>> batch["terminateds"]
        [array([False,  True])]
    """

    needs_episodes = True

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        present = set(batch)
        for episode in self.single_agent_episode_iterator(episodes):
            steps = len(episode)
            window = slice(0, steps)
            action_space = self.input_action_space or episode.action_space
            actions = partial(episode.get_actions, window)
            if is_composite(action_space):
                actions = partial(_packed, episode, window, action_space)
            per_step = {
                Columns.ACTIONS: actions,
                Columns.REWARDS: partial(episode.get_rewards, window),
                Columns.TERMINATEDS: partial(last_step_flags, [steps], [episode.is_terminated]),
                Columns.TRUNCATEDS: partial(last_step_flags, [steps], [episode.is_truncated]),
            }
            for key in episode.extra_model_outputs:
                per_step[key] = partial(episode.get_extra_model_outputs, key, window)
            for column, values in per_step.items():
                if column not in present:
                    self.add_n_batch_items(batch, column, values(), steps, episode)
        return batch


def _packed(episode, window: slice, action_space) -> object:
    """The episode's ``Dict``/``Tuple`` actions in ``window``, packed."""
    return pack_values(episode.get_actions(window), action_space)
