"""Ports of the seed's extension examples (RLlib's "Working with offline data" page), imported
by Ray Data workers by their module path. Each keeps the seed's code shape; where offline-rl
differs, a comment says how and why."""

from __future__ import annotations

import io
import random
import uuid
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
import ray.data
from PIL import Image

from connectors import (
    AddColumnsFromEpisodesToTrainBatch,
    AddObservationsFromEpisodesToBatch,
    BatchIndividualItems,
    ConnectorPipelineV2,
    ConnectorV2,
    FrameStackingLearner,
)
from offline_rl import SCHEMA, OfflineData, OfflinePreLearner, SingleAgentEpisode


class TextOfflinePreLearner(OfflinePreLearner):
    """The seed's text example: each sentence becomes one episode whose observations are its
    tokens, one-hot, and whose actions are the tokens that follow."""

    @staticmethod
    def _map_to_episodes(
        is_multi_agent: bool,
        batch: dict[str, Any],
        schema: dict[str, str] = SCHEMA,
        to_numpy: bool = False,
        input_compress_columns: list[str] | None = None,
        observation_space: gym.Space = None,
        action_space: gym.Space = None,
        vocabulary: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, list[SingleAgentEpisode]]:
        if not vocabulary:
            raise ValueError("No `vocabulary`. It needs a vocabulary in form of dictionary "
                             "mapping tokens to their IDs.")
        episodes = []
        for text in batch["text"]:
            tokens = text.split(" ")
            encoded = [vocabulary[token] for token in tokens]
            one_hot_vectors = np.zeros((len(tokens), len(vocabulary), 1, 1))
            for i, token in enumerate(tokens):
                if token in vocabulary:
                    one_hot_vectors[i][vocabulary[token] - 1] = 1.0
            episode = SingleAgentEpisode(
                id_=uuid.uuid4().hex,
                observations=list(one_hot_vectors),
                observation_space=observation_space,
                actions=encoded[1:],
                action_space=action_space,
                rewards=[0.0 for _ in range(len(encoded) - 2)] + [1.0],
                terminated=True,
                truncated=False,
                len_lookback_buffer=0,
                t_started=0,
            )
            if to_numpy:
                episode.to_numpy()
            episodes.append(episode)
        return {"episodes": episodes}


class FrameStackingTextPreLearner(OfflinePreLearner):
    """The seed's ``__call__`` example: its own learner connector pipeline, with a
    frame-stacking piece first. offline-rl's learners take flat numpy columns, so ``__call__``
    returns the pipeline's batch as it is (RLlib wraps it in a ``MultiAgentBatch`` and appends
    ``NumpyToTensor``); and no module is built, since no piece uses one."""

    def __init__(self, config: Any, spaces: tuple[gym.Space, gym.Space] | None = None,
                 vocabulary: dict[str, Any] | None = None, **kwargs: Any):
        self.config = config
        self.spaces = spaces
        self.vocabulary = vocabulary
        self.vocabulary_size = len(self.vocabulary)
        self._learner_connector = ConnectorPipelineV2(
            connectors=[FrameStackingLearner(num_frames=4)],
            input_observation_space=spaces[0],
            input_action_space=spaces[1],
        )
        self._learner_connector.append(
            AddObservationsFromEpisodesToBatch(as_learner_connector=True))
        self._learner_connector.append(AddColumnsFromEpisodesToTrainBatch())
        self._learner_connector.append(BatchIndividualItems())

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        episodes = TextOfflinePreLearner._map_to_episodes(
            is_multi_agent=False,
            batch=batch,
            to_numpy=True,
            schema=None,
            input_compress_columns=False,
            observation_space=self.spaces[0],
            action_space=self.spaces[1],
            vocabulary=self.vocabulary,
        )["episodes"]
        return self._learner_connector(rl_module=None, batch={}, episodes=episodes,
                                       shared_data={})


def decode_image(row: dict[str, Any]) -> dict[str, Any]:
    """Raw image bytes -> the image as an array (the seed's ``map_to_numpy``)."""
    return {"array": np.array(Image.open(io.BytesIO(row["bytes"])))}


class ImageOfflineData(OfflineData):
    """The seed's pipeline-level example: ``__init__`` reads the raw image files with
    ``ray.data.read_binary_files`` and decodes them; the PreLearners then map the arrays.
    ``sample`` is overridden too: it counts the batches the learner asked for."""

    def __init__(self, config: Any, spaces: tuple[gym.Space, gym.Space]):
        super().__init__(config, spaces)
        self.data = ray.data.read_binary_files(self.paths).map(decode_image)
        self.batches_sampled = 0

    def sample(self, num_samples: int | None = None, return_iterator: bool = False,
               num_shards: int = 1) -> Any:
        if not return_iterator:
            self.batches_sampled += 1
        return super().sample(num_samples, return_iterator, num_shards)


class ImageOfflinePreLearner(OfflinePreLearner):
    """Each image becomes a one-step episode, its pixels scaled to [0, 1]; the logged action is
    1 for bright images."""

    @staticmethod
    def _map_to_episodes(is_multi_agent: bool, batch: dict[str, Any], schema=SCHEMA,
                         to_numpy: bool = False, input_compress_columns=None,
                         observation_space: gym.Space = None, action_space: gym.Space = None,
                         **kwargs: Any) -> dict[str, list[SingleAgentEpisode]]:
        episodes = [
            SingleAgentEpisode(observations=[image / 255.0] * 2, actions=[int(image.mean() > 127)],
                               rewards=[1.0], terminated=True, len_lookback_buffer=0,
                               observation_space=observation_space, action_space=action_space)
            for image in batch["array"]]
        return {"episodes": [episode.to_numpy() for episode in episodes]}


class WholeEpisodeBuffer:
    """A ``prelearner_buffer_class`` written to the documented interface only (no
    ``__contains__``, no ``episodes``): keeps the newest episodes and samples whole ones."""

    def __init__(self, capacity: int, seed: int | None = None):
        self.capacity = capacity
        self._episodes: deque[SingleAgentEpisode] = deque()
        self._rng = random.Random(seed)

    def add(self, episodes: list[SingleAgentEpisode]) -> None:
        self._episodes.extend(episodes)
        while self.get_num_timesteps() > self.capacity and len(self._episodes) > 1:
            self._episodes.popleft()

    def sample(self, num_items: int, **kwargs: Any) -> list[SingleAgentEpisode]:
        """Whole episodes, the last one cut so that ``num_items`` timesteps are drawn."""
        drawn, needed = [], num_items
        while needed:
            episode = self._rng.choice(self._episodes)
            drawn.append(episode.slice(slice(0, needed)) if len(episode) > needed else episode)
            needed -= len(drawn[-1])
        return drawn

    def get_num_timesteps(self) -> int:
        return sum(len(episode) for episode in self._episodes)


class ScaleRewards(ConnectorV2):
    """Works on the flat train batch (it declares ``needs_episodes = False``); records what it
    was given."""

    needs_episodes = False

    def __init__(self, input_observation_space=None, input_action_space=None, *,
                 factor: float = 0.5, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.factor = factor

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        batch["rewards"] = np.asarray(batch["rewards"]) * self.factor
        batch["scaled_flat_batch"] = np.full(len(batch["rewards"]),
                                             not episodes and isinstance(batch["obs"], np.ndarray))
        return batch


class CountEpisodeSteps(ConnectorV2):
    """Reads the episodes (as every piece may unless it declares otherwise): each row's
    episode length."""

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        for episode in self.single_agent_episode_iterator(episodes):
            self.add_n_batch_items(batch, "episode_steps", np.full(len(episode), len(episode)),
                                   len(episode), episode)
        return batch
