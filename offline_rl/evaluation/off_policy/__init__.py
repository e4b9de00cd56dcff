"""Off-policy estimation: the value of a policy judged from episodes another policy logged
(importance sampling, weighted importance sampling, direct method, doubly robust)."""

from offline_rl.evaluation.off_policy.direct_method import DirectMethod, DoublyRobust
from offline_rl.evaluation.off_policy.estimator import ESTIMATE_KEYS, OffPolicyEstimator
from offline_rl.evaluation.off_policy.fitted_q_evaluation import FittedQEvaluation, FQEConfig
from offline_rl.evaluation.off_policy.importance_sampling import (
    ImportanceSampling,
    WeightedImportanceSampling,
)
from offline_rl.evaluation.off_policy.logged_episodes import LoggedEpisode, logged_episodes

__all__ = ["ESTIMATE_KEYS", "DirectMethod", "DoublyRobust", "FQEConfig", "FittedQEvaluation",
           "ImportanceSampling", "LoggedEpisode", "OffPolicyEstimator",
           "WeightedImportanceSampling", "logged_episodes"]
