"""The GPU learner path on a real CUDA device: a local learner, one remote learner and, where the
machine has two GPUs, two learners all-reducing with nccl.

Marked ``gpu``: deselected by default (see pyproject.toml) and run by ``make gpu-check``, which
installs a CUDA build of torch first. Without a CUDA device these tests fail, saying so.
"""

from __future__ import annotations

import numpy as np
import pytest
import ray
import torch

from offline_rl import Algorithm

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _cuda_device():
    if not torch.cuda.is_available():
        pytest.fail(f"tests marked gpu need a CUDA device; torch {torch.__version__} sees none. "
                    "Run them with `make gpu-check` on a machine with an NVIDIA GPU.")


def _weights(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: value.detach().cpu().numpy() for name, value in module.state_dict().items()}


@pytest.mark.timeout(300)
def test_a_local_gpu_learner_learns_and_its_checkpoint_restores_on_cpu(ray_session, bc_config,
                                                                     tmp_path):
    config = (bc_config.learners(num_learners=0, num_gpus_per_learner=1)
              .offline_data(dataset_num_iters_per_learner=10)
              .evaluation(evaluation_interval=1, evaluation_duration=10))
    with config.build() as algo:
        assert {p.device.type for p in algo.get_module().parameters()} == {"cuda"}
        returns = []
        while len(returns) < 30 and max(returns, default=0) < 450:  # at most 300 updates
            returns.append(algo.train()["evaluation"]["env_runners"]["episode_return_mean"])
        assert max(returns) >= 450, f"evaluation returns: {returns}"
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
        trained = _weights(algo.get_module())
    cpu_config = config.copy().learners(num_gpus_per_learner=0)
    with Algorithm.from_checkpoint(checkpoint, cpu_config) as on_cpu:
        assert {p.device.type for p in on_cpu.get_module().parameters()} == {"cpu"}
        restored = _weights(on_cpu.get_module())
        assert restored.keys() == trained.keys()
        for name, value in trained.items():
            np.testing.assert_array_equal(restored[name], value, err_msg=name)
        on_cpu.train()  # the optimizer's state moved to the CPU with the weights


@pytest.mark.timeout(300)
def test_a_remote_learner_holds_a_gpu_and_trains_on_it(ray_session, bc_config):
    gpus = ray.cluster_resources().get("GPU", 0)
    assert gpus >= 1, f"Ray sees {gpus} GPUs; start Ray on the GPU machine"
    algo = bc_config.learners(num_learners=1, num_gpus_per_learner=1).build()
    try:
        assert ray.available_resources().get("GPU", 0) == gpus - 1
        losses = [algo.train()["learners"]["default_policy"]["total_loss"] for _ in range(30)]
        assert losses[-1] < losses[0]
    finally:
        algo.stop()


@pytest.mark.timeout(300)
def test_two_gpu_learners_all_reduce_with_nccl_and_stay_identical(ray_session, bc_config):
    if torch.cuda.device_count() < 2:
        pytest.skip(f"nccl needs two GPUs; this machine has {torch.cuda.device_count()}")
    algo = bc_config.learners(num_learners=2, num_gpus_per_learner=1).build()
    try:
        for _ in range(5):
            result = algo.train()
        assert result["learners"]["__all_modules__"]["num_env_steps_trained"] == 2 * 512
        first, second = ray.get([actor.get_weights.remote()
                                 for actor in algo.learner_group._actors])
        for name, value in first.items():
            np.testing.assert_array_equal(second[name], value, err_msg=name)
    finally:
        algo.stop()
