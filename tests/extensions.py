"""Ports of the seed's extension examples (RLlib's "Working with offline data" page), imported
by Ray Data workers by their module path. Each keeps the seed's code shape; where offline-rl
differs, a comment says how and why."""

# The seed's ``TextOfflinePreLearner`` is kept verbatim, with its ``typing`` annotations:
# ruff: noqa: UP006, UP007, UP035, UP037, UP045, RUF013
from __future__ import annotations

import io
import random
import uuid
from collections import deque
from typing import Any, Dict, List, Optional, Tuple, Union

import gymnasium as gym
import numpy as np
import ray.data
from PIL import Image
from ray.actor import ActorHandle

from connectors import (
    AddColumnsFromEpisodesToTrainBatch,
    AddObservationsFromEpisodesToBatch,
    BatchIndividualItems,
    ConnectorV2,
    FrameStackingLearner,
    LearnerConnectorPipeline,
    NumpyToTensor,
)
from offline_rl import (
    SCHEMA,
    AlgorithmConfig,
    EpisodeType,
    Learner,
    ModuleID,
    MultiAgentBatch,
    MultiRLModuleSpec,
    OfflineData,
    OfflinePreLearner,
    SampleBatch,
    SingleAgentEpisode,
    override,
)


class TextOfflinePreLearner(OfflinePreLearner):
    # The seed's ``__call__`` example, verbatim but for the imports.

    @override(OfflinePreLearner)
    def __init__(
        self,
        config: "AlgorithmConfig",
        learner: Union[Learner, List[ActorHandle]] = None,
        locality_hints: Optional[List[str]] = None,
        spaces: Optional[Tuple[gym.Space, gym.Space]] = None,
        module_spec: Optional[MultiRLModuleSpec] = None,
        module_state: Optional[Dict[ModuleID, Any]] = None,
        vocabulary: Dict[str, Any] = None,
        **kwargs: Dict[str, Any],
    ):
        self.config = config
        self.spaces = spaces
        self.vocabulary = vocabulary
        self.vocabulary_size = len(self.vocabulary)

        # Build the `RLModule`.
        self._module = module_spec.build()
        if module_state:
            self._module.set_state(module_state)

        # Build the learner connector pipeline.
        self._learner_connector = LearnerConnectorPipeline(
            connectors=[
                FrameStackingLearner(
                    num_frames=4,
                )
            ],
            input_action_space=module_spec.action_space,
            input_observation_space=module_spec.observation_space,
        )
        self._learner_connector.append(
            AddObservationsFromEpisodesToBatch(as_learner_connector=True),
        )
        self._learner_connector.append(
            AddColumnsFromEpisodesToTrainBatch(),
        )
        self._learner_connector.append(
            BatchIndividualItems(multi_agent=False),
        )
        # Let us run exclusively on CPU, then we can convert here to Tensor.
        self._learner_connector.append(
            NumpyToTensor(as_learner_connector=True),
        )

    @override(OfflinePreLearner)
    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, List[EpisodeType]]:

        # Convert raw data to episodes.
        episodes = TextOfflinePreLearner._map_to_episodes(
            is_multi_agent=False,
            batch=batch,
            to_numpy=True,
            schema=None,
            input_compress_columns=False,
            action_space=self.spaces[0],
            observation_space=self.spaces[1],
            vocabulary=self.vocabulary,
        )["episodes"]

        # Run the learner connector pipeline with the
        # `FrameStackLearner` piece.
        batch = self._learner_connector(
            rl_module=self._module,
            batch={},
            episodes=episodes,
            shared_data={},
        )

        # Convert to `MultiAgentBatch` for the learner.
        batch = MultiAgentBatch(
            {
                module_id: SampleBatch(module_data)
                for module_id, module_data in batch.items()
            },
            # TODO (simon): This can be run once for the batch and the
            # metrics, but we run it twice: here and later in the learner.
            env_steps=sum(e.env_steps() for e in episodes),
        )

        # Return the `MultiAgentBatch` under the `"batch"` key.
        return {"batch": batch}

    @staticmethod
    @override(OfflinePreLearner)
    def _map_to_episodes(
        is_multi_agent: bool,
        batch: Dict[str, Union[list, np.ndarray]],
        schema: Dict[str, str] = SCHEMA,
        to_numpy: bool = False,
        input_compress_columns: Optional[List[str]] = None,
        observation_space: gym.Space = None,
        action_space: gym.Space = None,
        vocabulary: Dict[str, Any] = None,
        **kwargs: Dict[str, Any],
    ) -> Dict[str, List[EpisodeType]]:

        # If we have no vocabulary raise an error.
        if not vocabulary:
            raise ValueError(
                "No `vocabulary`. It needs a vocabulary in form of dictionary ",
                "mapping tokens to their IDs."
            )
        # Define container for episodes.
        episodes = []

        # Data comes in batches of string arrays under the `"text"` key.
        for text in batch["text"]:
            # Split the text and tokenize.
            tokens = text.split(" ")
            # Encode tokens.
            encoded = [vocabulary[token] for token in tokens]
            one_hot_vectors = np.zeros((len(tokens), len(vocabulary), 1, 1))
            for i, token in enumerate(tokens):
                if token in vocabulary:
                    one_hot_vectors[i][vocabulary[token] - 1] = 1.0

            # Build the `SingleAgentEpisode`.
            episode = SingleAgentEpisode(
                # Generate a unique ID.
                id_=uuid.uuid4().hex,
                # agent_id="default_policy",
                # module_id="default_policy",
                # We use the starting token with all added tokens as observations.
                observations=[ohv for ohv in one_hot_vectors],
                observation_space=observation_space,
                # Actions are defined to be the "chosen" follow-up token after
                # given the observation.
                actions=encoded[1:],
                action_space=action_space,
                # Rewards are zero until the end of a sequence.
                rewards=[0.0 for i in range(len(encoded) - 2)] + [1.0],
                # The episode is always terminated (as sentences in the dataset are).
                terminated=True,
                truncated=False,
                # No lookback. You want the episode to start at timestep zero.
                len_lookback_buffer=0,
                t_started=0,
            )

            # If episodes should be numpy'ized. Some connectors need this.
            if to_numpy:
                episode.to_numpy()

            # Append the episode to the list of episodes.
            episodes.append(episode)

        # Return a batch with key `"episodes"`.
        return {"episodes": episodes}


class TextEpisodesPreLearner(OfflinePreLearner):
    """The seed's first text example: only ``_map_to_episodes`` (the same as the second's),
    with ``prelearner_kwargs``; each sentence becomes one episode of one-hot tokens."""

    _map_to_episodes = staticmethod(TextOfflinePreLearner._map_to_episodes)


class TwoModules(TextOfflinePreLearner):
    """Returns the seed's ``{"batch": MultiAgentBatch}`` with its module's batch under a second
    module id too: the pipeline must refuse it."""

    def __call__(self, batch):
        single = super().__call__(batch)["batch"].policy_batches["default_policy"]
        return {"batch": MultiAgentBatch({"default_policy": single, "other": single},
                                         env_steps=single.count)}


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
