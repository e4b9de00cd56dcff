"""A run's result files and learning curves, from a real `offline-rl train` run: result.json,
progress.csv, TensorBoard events read back, and a PNG with every panel drawn."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from matplotlib.image import imread
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from offline_rl.cli import main
from offline_rl.datasets import make_dataset


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_a_run_is_logged_to_json_csv_and_tensorboard_and_plotted(ray_session, bc_config,
                                                                  tmp_path, capsys):
    make_dataset("CartPole-v1", tmp_path / "held-out", tier="medium", episodes=4, seed=3,
                 progress=False)
    config = bc_config.evaluation(
        evaluation_interval=2, evaluation_duration=2, offline_evaluation_interval=1,
        offline_eval_input_=str(tmp_path / "held-out"),
        off_policy_estimation_methods={"wis": {"type": "WeightedImportanceSampling"}},
        evaluation_config={"input_": str(tmp_path / "held-out")})
    config_file, run = tmp_path / "bc.yaml", tmp_path / "run"
    config.to_yaml(config_file)
    assert main(["train", str(config_file), "--max-iterations", "4", "--output-dir",
                 str(run)]) == 0
    results = [json.loads(line) for line in (run / "result.json").read_text().splitlines()]
    assert [result["training_iteration"] for result in results] == [1, 2, 3, 4]
    # Iteration 1 evaluates offline only: no env return yet (the progress bar shows "-").
    assert "env_runners" not in results[0]["evaluation"]
    with (run / "progress.csv").open() as file:
        rows = list(csv.DictReader(file))
    # The first evaluation (iteration 2) added its columns; iteration 1 left them blank.
    estimate = "evaluation/off_policy_estimation/wis/v_target"
    assert rows[0][estimate] == "" and float(rows[1][estimate]) == pytest.approx(
        results[1]["evaluation"]["off_policy_estimation"]["wis"]["v_target"])
    events = EventAccumulator(str(run))
    events.Reload()
    losses = events.Scalars("learners/default_policy/total_loss")
    assert [event.step for event in losses] == [1, 2, 3, 4]
    assert [event.value for event in losses] == pytest.approx(
        [result["learners"]["default_policy"]["total_loss"] for result in results], rel=1e-6)
    assert "evaluation/offline_eval_runners/default_policy/total_loss" in events.Tags()[
        "scalars"]

    capsys.readouterr()
    assert main(["plot", str(run)]) == 0
    image = imread(capsys.readouterr().out.strip())
    assert image.shape == (750, 1100, 4)
    drawn = (image[..., :3] < 0.9).any(axis=-1)  # anything but white
    assert drawn.mean() > 0.05
    assert len(np.unique(image[..., :3].reshape(-1, 3), axis=0)) > 100  # lines, not just text


def test_a_run_without_evaluation_gets_only_its_panels_and_the_per_iteration_rate(tmp_path,
                                                                                   capsys):
    from offline_rl.monitoring.learning_curves import panels, steps_per_second
    from offline_rl.monitoring.result_log import ResultLog, flatten, read_results

    with ResultLog(tmp_path, tensorboard=False) as log:
        for iteration, seconds in enumerate([4.0, 1.0, 1.0], start=1):  # start-up, then steady
            log.write({"training_iteration": iteration, "time_this_iter_s": seconds,
                       "learners": {"default_policy": {"total_loss": 1.0 / iteration},
                                    "__all_modules__": {"num_env_steps_trained": 1000}}})
    rows = [flatten(result) for result in read_results(tmp_path)]
    assert [title for title, _, _ in panels(rows)] == ["losses", "throughput, per iteration"]
    assert steps_per_second(rows) == ([1, 2, 3], [250.0, 1000.0, 1000.0])
    assert main(["plot", str(tmp_path)]) == 0
    assert imread(capsys.readouterr().out.strip()).shape == (375, 1100, 4)  # one row of two
