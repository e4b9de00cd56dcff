"""The reference datasets ``offline-rl datasets make ENV TIER`` records: the gymnasium envs that
have a scripted expert, offline-rl's multi-agent envs whose agents play those experts, and the
quality tiers of its behaviour policies (``offline_rl.datasets``
holds the experts). Declared here, importing nothing, so that ``offline-rl --help`` lists them
without loading gymnasium.

Examples:
    >>> from offline_rl.datasets import EXPERTS
    >>> list(EXPERTS) == list(EXPERT_ENVS), TIERS[-1]
    (True, 'mixed')
"""

#: Envs with a scripted expert, by gymnasium id.
EXPERT_ENVS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1")
#: offline-rl's multi-agent envs (``offline_rl.evaluation.multi_agent_env``), each with the
#: gymnasium env whose expert (of the same tier) every one of its agents plays.
MULTI_AGENT_ENVS = {"MultiAgentCartPole": "CartPole-v1", "AlternatingCartPole": "CartPole-v1"}
#: Behaviour policy qualities, from worst to best, then a mixture of the three.
TIERS = ("random", "medium", "expert", "mixed")
