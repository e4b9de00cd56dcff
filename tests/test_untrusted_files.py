"""Loading a checkpoint or a YAML config never imports or calls what it names, never hangs or
fills memory on a file that is not a file, and names the file and the fault when it is damaged.
Each test goes through a public entry point: ``Algorithm.from_checkpoint``/``restore_from_path``,
``AlgorithmConfig.from_yaml`` or the ``offline-rl`` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

from offline_rl import Algorithm, AlgorithmConfig, BCConfig
from offline_rl.algorithms.checkpoint import (
    ALGORITHM_STATE_FILE,
    CONFIG_FILE,
    LEARNER_STATE_FILE,
)
from offline_rl.cli import main
from offline_rl.errors import CheckpointError, ConfigError

SPACES = {"observation_space": gym.spaces.Box(-5, 5, (4,), np.float32),
          "action_space": gym.spaces.Discrete(2)}


@pytest.fixture()
def planted_module(tmp_path, monkeypatch):
    """A module on ``sys.path`` that creates a marker file when it is imported: what a crafted
    file would name. Returns its name and the marker."""
    marker = tmp_path / "imported"
    name = f"planted_{os.getpid()}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""
        import pathlib
        pathlib.Path({str(marker)!r}).touch()
        from offline_rl import OfflinePreLearner
        class Planted(OfflinePreLearner):
            pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name, marker


def saved_config(folder: Path, values: dict) -> Path:
    folder.mkdir(exist_ok=True)
    base = BCConfig().environment("CartPole-v1", **SPACES).offline_data(input_="data").to_dict()
    for section, options in values.items():
        base[section] = {**base[section], **options}
    (folder / CONFIG_FILE).write_text(yaml.safe_dump(base))
    return folder


@pytest.mark.parametrize(("section", "options", "field"), [
    ("offline_data", {"prelearner_class": "{module}:Planted"}, "offline_data.prelearner_class"),
    ("offline_data", {"offline_data_class": "{module}:Planted"}, "offline_data.offline_data_class"),
    ("training", {"learner_connector": "{module}:Planted"}, "training.learner_connector"),
    ("environment", {"env": "{module}:CartPole-v1"}, "environment.env"),
    ("evaluation", {"evaluation_config": {"input_": "held-out",
                                          "prelearner_class": "{module}:Planted"}},
     "evaluation.evaluation_config.prelearner_class"),
    ("evaluation", {"off_policy_estimation_methods": {"is": {"type": "{module}:Planted"}}},
     "evaluation.off_policy_estimation_methods.is.type"),
])
def test_a_checkpoint_naming_code_is_refused_and_the_code_never_runs(
        tmp_path, planted_module, section, options, field):
    module, marker = planted_module
    named = yaml.safe_load(yaml.safe_dump(options).replace("{module}", module))
    folder = saved_config(tmp_path / "checkpoint", {section: named})
    with pytest.raises(ConfigError, match=rf"{CONFIG_FILE}: {field} names '{module}:.*' is not "
                                          rf"imported in this process.*--import {module}"):
        Algorithm.from_checkpoint(folder)
    assert main(["evaluate", str(folder), "--episodes", "1"]) == 2
    assert not marker.exists() and module not in sys.modules


def test_the_users_word_imports_a_module(tmp_path, planted_module, capsys):
    from offline_rl.cli_arguments import import_modules

    module, marker = planted_module
    folder = saved_config(tmp_path / "checkpoint", {
        "offline_data": {"prelearner_class": f"{module}:Planted"}})
    assert main(["evaluate", str(folder), "--import", f"{module}_missing"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"offline-rl: error: --import {module}_missing: No module named '{module}_missing'; is it "
        "installed, or on PYTHONPATH?")
    import_modules([module])  # what --import does before the command runs
    assert marker.exists()
    config = AlgorithmConfig.from_yaml(folder / CONFIG_FILE)
    assert config.prelearner_class is sys.modules[module].Planted


@pytest.mark.parametrize("field", ["input_read_method_kwargs", "map_batches_kwargs"])
def test_a_config_file_cannot_set_a_runtime_env(tmp_path, field):
    folder = saved_config(tmp_path / "checkpoint", {"offline_data": {
        field: {"ray_remote_args": {"runtime_env": {"pip": ["planted-package"]}}}}})
    with pytest.raises(ConfigError, match=rf"offline_data\.{field} sets a Ray runtime_env, which "
                                          r"installs and runs code"):
        AlgorithmConfig.from_yaml(folder / CONFIG_FILE)


def test_a_name_resolves_to_a_class_of_an_imported_module_that_fits_the_field(tmp_path):
    from tests.prelearners import NegatedRewards

    folder = saved_config(tmp_path / "ok", {
        "offline_data": {"prelearner_class": "tests.prelearners:NegatedRewards"}})
    assert AlgorithmConfig.from_yaml(folder / CONFIG_FILE).prelearner_class is NegatedRewards
    saved_config(folder, {"offline_data": {"prelearner_class": "os:system"}})
    with pytest.raises(ConfigError, match=r"prelearner_class names 'os:system', which is not a "
                                          r"subclass of offline_rl\.data\.prelearner\.prelearner\."
                                          r"OfflinePreLearner"):
        AlgorithmConfig.from_yaml(folder / CONFIG_FILE)


#: Eleven levels of ten aliases each as a learning rate: 10**11 values once expanded (the
#: message naming the bad value expanded it: offline-rl ran ~60 s and died with MemoryError).
BILLION_LAUGHS = "algorithm: BC\ntraining:\n  lr:\n" + "".join(
    f"  - &k{i} [{', '.join([f'*k{i - 1}'] * 10) if i else 'x'}]\n" for i in range(12))


def test_a_yaml_alias_bomb_is_refused_quickly_in_little_memory(tmp_path):
    config_file = tmp_path / "bomb.yaml"
    config_file.write_text(BILLION_LAUGHS)
    # VmHWM: this process's peak resident memory since exec (ru_maxrss keeps the parent's)
    script = ("import sys\nfrom offline_rl.cli import main\ncode = main(['train', "
              f"{str(config_file)!r}])\nprint(next(line.split()[1] for line in "
              "open('/proc/self/status') if line.startswith('VmHWM')))\nsys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"offline-rl: error: {config_file} expands to more than 1,000,000 values through its "
        "YAML aliases (*name); refused, as aliases of aliases can expand without bound. Write "
        "the values out")
    assert int(done.stdout.split()[-1]) < 300 * 1024  # peak resident KiB: imports only


@pytest.mark.parametrize(("content", "message"), [
    (b"training:\n  lr: 0.001 # caf\xe9\n", r"is not UTF-8 text \(byte 27 is b'\\xe9'\)"),
    (b"# " + b"x" * (1024 * 1024) + b"\n", r"holds 1,048,579 bytes, over the cap of 1,048,576"),
    (b"training: [lr, 0.001]\n", r"section 'training' must be a mapping of keys to values, got "
                                 r"list"),
    (b"a: &a [*a]\n", r"holds an alias inside its own anchor"),
    (b"a: &a [x, x]\n" + b"".join(b"b%d: &b%d [*%s, *%s]\n" % (i, i, *[b"b%d" % (i - 1) if i
                                   else b"a"] * 2) for i in range(40)),
     r"expands to more than 1,000,000 values"),
    (b"[" * 100_000, r"nests too deep to be a config"),
])
def test_a_config_file_that_is_not_a_config_is_named(tmp_path, content, message):
    config_file = tmp_path / "config.yaml"
    config_file.write_bytes(content)
    with pytest.raises(ConfigError, match=rf"{config_file}.*{message}"):
        AlgorithmConfig.from_yaml(config_file)


@pytest.fixture(scope="module")
def saved_checkpoint(bc_config_module, tmp_path_factory):
    """A real BC checkpoint and the algorithm that wrote it (built once for the module)."""
    algo = bc_config_module.build()
    path = Path(algo.save_to_path(tmp_path_factory.mktemp("saved") / "checkpoint"))
    yield algo, path
    algo.stop()


@pytest.fixture(scope="module")
def bc_config_module(ray_session, cartpole_data):
    return (BCConfig().environment("CartPole-v1")
            .training(train_batch_size_per_learner=64)
            .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=1)
            .rl_module(model_config={"fcnet_hiddens": [8]}).debugging(seed=0))


def damage_fifo(file: Path, outside: Path) -> None:
    file.unlink()
    os.mkfifo(file)


def damage_dev_zero(file: Path, outside: Path) -> None:
    file.unlink()
    file.symlink_to("/dev/zero")


def damage_link_outside(file: Path, outside: Path) -> None:
    shutil.copy(file, outside)
    file.unlink()
    file.symlink_to(outside)


def damage_directory(file: Path, outside: Path) -> None:
    file.unlink()
    file.mkdir()


def damage_truncate(file: Path, outside: Path) -> None:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


@pytest.mark.timeout(60)  # a FIFO read would block forever
@pytest.mark.parametrize("name", [LEARNER_STATE_FILE, ALGORITHM_STATE_FILE, CONFIG_FILE])
@pytest.mark.parametrize(("damage", "message"), [
    (damage_fifo, "is not a regular file"),
    (damage_dev_zero, "links to /dev/zero, outside"),
    (damage_link_outside, "links to .*outside"),
    (damage_directory, "is a directory, not a file"),
    (damage_truncate, "damaged"),
])
def test_a_damaged_checkpoint_file_is_named_and_nothing_hangs(
        saved_checkpoint, tmp_path, name, damage, message):
    algo, saved = saved_checkpoint
    folder = Path(shutil.copytree(saved, tmp_path / "checkpoint"))
    if damage is damage_truncate and name == CONFIG_FILE:
        (folder / name).write_text("training: {lr: [0, ")  # half a YAML document
        message = "is no plain YAML config"
    else:
        damage(folder / name, tmp_path / "elsewhere")
    error_type = ConfigError if name == CONFIG_FILE and damage is damage_truncate else \
        CheckpointError
    with pytest.raises(error_type, match=rf"{folder / name}.*{message}"):
        if name == CONFIG_FILE:
            Algorithm.from_checkpoint(folder)
        else:
            algo.restore_from_path(folder)


@pytest.mark.parametrize(("state", "message"), [
    ("[" * 100_000 + "]" * 100_000, "it nests too deep"),
    ('{"training_iteration": "seven"}', "training_iteration is 'seven', not a count"),
    ("not json", "not JSON"),
    ('{"training_iteration": 1, "num_env_steps_trained_lifetime": 1, "num_updates_lifetime": 1, '
     '"data_position": {"epoch": "x"}}', "data_position is {'epoch': 'x'}, not where a data "
                                         "stream stood"),
])
def test_damaged_counters_are_named(saved_checkpoint, tmp_path, state, message):
    algo, saved = saved_checkpoint
    folder = Path(shutil.copytree(saved, tmp_path / "checkpoint"))
    (folder / ALGORITHM_STATE_FILE).write_text(state)
    with pytest.raises(CheckpointError,
                       match=rf"{folder / ALGORITHM_STATE_FILE} is damaged: {message}"):
        algo.restore_from_path(folder)


def test_damaged_random_states_are_named(saved_checkpoint, tmp_path):
    algo, saved = saved_checkpoint
    folder = Path(shutil.copytree(saved, tmp_path / "checkpoint"))
    state = json.loads((folder / ALGORITHM_STATE_FILE).read_text())
    state["rng_states"]["numpy"][1] = state["rng_states"]["numpy"][1][:10]
    (folder / ALGORITHM_STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(CheckpointError, match=rf"{ALGORITHM_STATE_FILE} is damaged: its "
                                              r"rng_states cannot be restored \(IndexError"):
        algo.restore_from_path(folder)
