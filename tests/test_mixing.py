"""Weighted mixing of offline sources (issue 38): each train batch's rows come from the sources
in the given proportions, a small source repeats, the mix resumes exactly, bad input is named."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from offline_rl import BCConfig
from offline_rl.cli import main
from offline_rl.data.feed.batch_stream import BatchStream
from offline_rl.data.feed.mixed_stream import MixedStream, mix_counts
from offline_rl.data.pipeline.mixed_data import MixedData
from offline_rl.errors import ConfigError, DataFormatError

SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
FIXTURES = Path(__file__).parent / "fixtures"
pytestmark = pytest.mark.timeout(300)


def write_source(folder: Path, rows: int, action: int, *, seed: int = 0, obs_size: int = 4,
                 actions: list | None = None) -> str:
    """CartPole-like rows (observations drawn alike) whose actions are all ``action``; the
    ``rewards`` column numbers the rows (to tell them apart)."""
    folder.mkdir(parents=True, exist_ok=True)
    obs = np.random.default_rng(seed).normal(0, 0.5, (rows + 1, obs_size)).astype(np.float32)
    pq.write_table(pa.table({
        "eps_id": [f"{folder.name}-{i // 50}" for i in range(rows)], "t": list(range(rows)),
        "obs": obs[:-1].tolist(), "new_obs": obs[1:].tolist(),
        "actions": actions if actions is not None else [action] * rows,
        "rewards": [float(i) for i in range(rows)],
        "terminateds": [(i + 1) % 50 == 0 for i in range(rows)],
    }), folder / "part.parquet")
    return str(folder)


def config(input_, *, batch: int = 64, materialize: bool = True, iters: int = 10) -> BCConfig:
    return (BCConfig().environment(observation_space=SPACES[0], action_space=SPACES[1])
            .training(lr=1e-2, train_batch_size_per_learner=batch)
            .rl_module(model_config={"fcnet_hiddens": [16]})
            .offline_data(input_=input_, materialize_mapped_data=materialize,
                          dataset_num_iters_per_learner=iters)
            .debugging(seed=0))


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("mix")
    return write_source(root / "zeros", 3000, 0, seed=1), write_source(root / "ones", 800, 1,
                                                                       seed=2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return write_source(tmp_path_factory.mktemp("tiny") / "tiny", 150, 1, seed=3)


def test_counts_stay_within_one_row_of_the_weights():
    weights, taken = [0.5, 0.3, 0.2], [0, 0, 0]
    for batch in [7, 64, 1, 13, 100] * 20:
        counts = mix_counts(weights, taken, batch)
        assert sum(counts) == batch
        assert all(abs(count - weight * batch) < 2 for count, weight in zip(counts, weights))
        taken = [t + c for t, c in zip(taken, counts)]
        assert all(abs(t - w * sum(taken)) < 1 for t, w in zip(taken, weights))


@pytest.mark.slow
def test_batches_mix_in_proportion_and_the_small_source_repeats(ray_session, sources, tiny):
    zeros, ones = sources[0], tiny
    data = MixedData(config({zeros: 0.8, ones: 0.2}, batch=50).data_config(SPACES), SPACES)
    data.start()
    try:
        ones_rows, taken = [], [0, 0]
        for _ in range(40):  # 400 rows of 'ones': its 150 rows repeat
            batch = data.sample()
            ones_in_batch = int(batch["actions"].sum())
            counts = mix_counts([0.8, 0.2], taken, 50)
            assert ones_in_batch == counts[1] and abs(ones_in_batch - 10) < 2
            taken = [t + c for t, c in zip(taken, counts)]
            ones_rows += batch["rewards"][batch["actions"] == 1].tolist()
        assert sorted(set(ones_rows)) == [float(i) for i in range(150)]
        assert data.stats.source_rows == {zeros: 1600, ones: 400}
        assert data.stats.epochs_completed == 0  # 'zeros' (3000 rows) not read through yet
    finally:
        data.stop()


@pytest.mark.parametrize(("num_learners", "materialize"),
                         [(0, True), (0, False), (2, True), (2, False)])
@pytest.mark.slow
def test_bc_learns_the_mixed_action_probability(ray_session, sources, num_learners,
                                                materialize):
    zeros, ones = sources
    run = config({zeros: 0.8, ones: 0.2}, batch=128, materialize=materialize, iters=25)
    with run.learners(num_learners=num_learners).build() as algo:
        for _ in range(2):
            result = algo.train()
        module = algo.get_module()
    sources_rows = result["data"]["sources"]
    assert sum(sources_rows.values()) == 25 * 128 * max(1, num_learners)
    assert abs(sources_rows[ones] / sum(sources_rows.values()) - 0.2) < 0.01
    obs = torch.as_tensor(np.random.default_rng(5).normal(0, 0.5, (500, 4)), dtype=torch.float32)
    with torch.no_grad():
        logits = module.forward_inference({"obs": obs})["action_dist_inputs"]
    probability = float(torch.softmax(logits, -1)[:, 1].mean())
    assert abs(probability - 0.2) < 0.05, probability


@pytest.mark.slow
def test_a_resumed_mix_continues_exactly(ray_session, sources, tmp_path):
    zeros, ones = sources
    run = config({zeros: 0.7, ones: 0.3}, batch=64, iters=5)

    def batches(data, count):
        return [data.sample()["rewards"].tolist() for _ in range(count)]

    data = MixedData(run.data_config(SPACES), SPACES).start()
    batches(data, 7)
    saved = data.stream.saved_position()
    uninterrupted = batches(data, 5)
    data.stop()
    data = MixedData(run.data_config(SPACES), SPACES).start()
    data.stream = data.feeds(0)[0].open(saved)
    assert batches(data, 5) == uninterrupted
    data.stop()
    with run.build() as algo:
        algo.train()
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
        second = algo.train()["learners"]["default_policy"]["policy_loss"]
    with type(algo).from_checkpoint(checkpoint) as restored:
        assert restored.train()["learners"]["default_policy"]["policy_loss"] == second


@pytest.mark.parametrize("materialize", [True, False])
@pytest.mark.slow
def test_per_source_form_mixes_two_formats(ray_session, sources, materialize):
    zeros, _ = sources
    input_ = [{"input_": zeros, "weight": 1},
              {"input_": str(FIXTURES / "rllib_cartpole_sample_batch_json"), "weight": 1,
               "input_read_method": "read_json", "input_read_sample_batches": True}]
    with pytest.warns(UserWarning, match=r"sum to 2.*0\.5.*0\.5") as caught:
        data = MixedData(config(input_, batch=40, materialize=materialize).data_config(SPACES),
                         SPACES)
    assert caught[0].filename == __file__
    data.start()
    try:
        batch = data.sample()
        assert batch["obs"].shape == (40, 4)
        assert list(data.stats.source_rows.values()) == [20, 20]
    finally:
        data.stop()


@pytest.mark.parametrize("weight", [-1, 0, float("nan"), float("inf"), -float("inf"), "0.5",
                                    None, True, [1], 10 ** 400])
def test_bad_weights_are_refused(sources, weight):
    zeros, ones = sources
    with pytest.raises(ConfigError, match=r"input_: source '.*ones': the weight must be a "
                                          r"finite number above 0"):
        config({zeros: 0.5, ones: weight}).build()


@pytest.mark.parametrize("weights, shares", [
    ((1e308, 1e308), [0.5, 0.5]),                  # their sum overflows
    ((1.7e308, 1e-10), [1.0, 1e-10 / 1.7e308]),
    ((1e-320, 1e-320), [0.5, 0.5]),                # subnormal
    ((5e-324, 3 * 5e-324), [0.25, 0.75]),
    ((np.int64(3), np.float32(1)), [0.75, 0.25]),
])
def test_extreme_weights_are_divided_by_their_sum_safely(sources, weights, shares):
    with pytest.warns(UserWarning, match=r"the input_ weights sum to .*not 1"):
        data = MixedData(config(dict(zip(sources, weights))).data_config(SPACES), SPACES)
    assert data.weights == pytest.approx(shares, rel=1e-12) and 0 < min(data.weights)
    assert math.isclose(sum(data.weights), 1.0)


def test_weights_whose_ratio_underflows_are_refused(sources):
    zeros, ones = sources
    for weights in ({zeros: 1e300, ones: 1e-300}, {zeros: 1e-300, "sampler": 1e300}):
        weak = next(name for name, weight in weights.items() if weight == 1e-300)
        with pytest.raises(ConfigError, match=rf"source '.*{Path(weak).name}': the weight "
                                              r"1e-300 is too small beside the weight 1e\+300 "
                                              r"of source .*: its share of a train batch "
                                              r"underflows to 0"):
            config(weights).environment("CartPole-v1").build()


def test_a_yaml_weight_read_as_a_str_is_refused_by_the_cli(sources, tmp_path, capsys):
    zeros, ones = sources
    config_file = tmp_path / "mix.yaml"
    config(zeros).to_yaml(config_file)
    text = config_file.read_text().replace(f"input_: {zeros}", f"input_:\n    {zeros}: 1e308\n"
                                           f"    {ones}: 1e308")
    config_file.write_text(text)
    before = config_file.read_bytes()
    assert main(["train", str(config_file), "--output-dir", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-2:] == [
        "offline-rl: error: invalid BCConfig:",
        f"  input_: source {zeros!r}: the weight must be a finite number above 0, got '1e308' "
        "(a str: write it as a number; YAML reads 1e308 as a str, 1.0e+308 as a number)"]
    assert config_file.read_bytes() == before


@pytest.mark.slow
def test_an_empty_source_is_named(ray_session, sources, tmp_path):
    zeros, _ = sources
    empty = tmp_path / "empty"
    empty.mkdir()
    pq.write_table(pq.read_table(zeros).slice(0, 0), empty / "part.parquet")
    data = MixedData(config({zeros: 0.5, str(empty): 0.5}).data_config(SPACES), SPACES)
    with pytest.raises(DataFormatError, match=rf"source '{empty}'.*(empty|no rows)"):
        data.start()
        try:
            data.sample()
        finally:
            data.stop()


@pytest.mark.parametrize("defect", ["obs_size", "action_type"])
def test_a_source_unlike_the_others_is_named(ray_session, sources, tmp_path, defect):
    zeros, _ = sources
    odd = (write_source(tmp_path / "odd", 100, 0, obs_size=3) if defect == "obs_size" else
           write_source(tmp_path / "odd", 100, 0, actions=[0.5] * 100))
    with pytest.raises(DataFormatError, match=rf"source '{odd}'"):
        MixedData(config({zeros: 0.5, odd: 0.5}).data_config(SPACES), SPACES)


@pytest.mark.slow
def test_sources_mapped_to_different_shapes_are_named_and_extras_left_out_with_a_warning():
    def stream(columns):
        return BatchStream(lambda: columns, lambda data, epoch: [data]).start()

    plain = {"obs": np.zeros((8, 4)), "actions": np.zeros(8)}
    mixed = MixedStream([stream(plain), stream({**plain, "action_logp": np.zeros(8)})],
                        [0.75, 0.25], ["plain", "logged"])
    with pytest.warns(UserWarning, match=r"\['action_logp'\] left out of the train batches, "
                                         r"as source\(s\) \['plain'\] do not give them"):
        assert sorted(mixed.next_batch(4)) == ["actions", "obs"]
    # left out of every later batch too, also of those that take rows from 'logged' alone
    assert all(sorted(mixed.next_batch(1)) == ["actions", "obs"] for _ in range(20))
    assert mixed.source_rows["logged"] > 1
    mixed.stop()
    mixed = MixedStream([stream(plain), stream({**plain, "obs": np.zeros((8, 3))})],
                        [0.5, 0.5], ["plain", "odd"])
    with pytest.raises(DataFormatError, match=r"source 'odd' gives 'obs' of per-row shape \(3,\)"):
        mixed.next_batch(4)
    mixed.stop()
