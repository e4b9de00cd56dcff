"""Off-policy estimation: the value of a policy judged from episodes another policy logged
(importance sampling, weighted importance sampling, direct method, doubly robust), under
RLlib's names: ``from offline_rl.evaluation.off_policy import DoublyRobust, FQETorchModel``
where RLlib imports from ``ray.rllib.offline.estimators``."""

from offline_rl.evaluation.off_policy.direct_method import DirectMethod, DoublyRobust
from offline_rl.evaluation.off_policy.estimator import (
    DATASET_ESTIMATE_KEYS,
    ESTIMATE_KEYS,
    OffPolicyEstimator,
)
from offline_rl.evaluation.off_policy.fitted_q_evaluation import (
    FQEConfig,
    FQETorchModel,
    q_model_of,
)
from offline_rl.evaluation.off_policy.importance_sampling import (
    ImportanceSampling,
    TrajectoryImportanceSampling,
    WeightedImportanceSampling,
)
from offline_rl.evaluation.off_policy.logged_episodes import LoggedEpisode, logged_episodes
from offline_rl.evaluation.off_policy.policy import Policy

__all__ = ["DATASET_ESTIMATE_KEYS", "ESTIMATE_KEYS", "DirectMethod", "DoublyRobust",
           "FQEConfig", "FQETorchModel", "ImportanceSampling", "LoggedEpisode",
           "OffPolicyEstimator", "Policy", "TrajectoryImportanceSampling",
           "WeightedImportanceSampling", "logged_episodes",
           "q_model_of"]
