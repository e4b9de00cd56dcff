"""Every failure of every ``offline-rl`` command ends with ``offline-rl: error: <what, where,
how to fix>`` as the last line on stderr and exit status 2, with no traceback (issue 35,
class 7); nonsense counts are refused before anything is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from offline_rl import BCConfig
from offline_rl.cli import main

#: argv (with {file}, {folder}, {config}, {missing} for paths made per test) -> what the last
#: line says after "offline-rl: error: ".
CASES = {
    "no command": ([], "the following arguments are required: COMMAND"),
    "train, missing config": (["train", "{missing}"],
                              "argument config: config file '{missing}' does not exist"),
    "train, config is a folder": (["train", "{folder}"],
                                  "argument config: config '{folder}' is not a file (a folder?)"),
    "train, zero iterations": (["train", "{config}", "--max-iterations", "0"],
                               "argument --max-iterations: 0 is below 1; give at least 1"),
    "train, negative checkpoint frequency": (
        ["train", "{config}", "--checkpoint-frequency", "-1"],
        "argument --checkpoint-frequency: -1 is below 0"),
    "train, keep no checkpoints": (["train", "{config}", "--keep-checkpoints", "0"],
                                   "argument --keep-checkpoints: 0 is below 1"),
    "train, NaN stop return": (["train", "{config}", "--stop-return", "nan"],
                               "argument --stop-return: 'nan' is not a finite number"),
    "train, fractional iterations": (["train", "{config}", "--max-iterations", "2.5"],
                                     "argument --max-iterations: '2.5' is not a whole number"),
    "train, missing run to resume": (["train", "{config}", "--resume", "{missing}"],
                                     "argument --resume: '{missing}' does not exist"),
    "train, output folder is a file": (["train", "{config}", "--output-dir", "{file}"],
                                       "output folder {file} is a file"),
    "train, missing data (no output folder made)": (
        ["train", "{config}", "--output-dir", "{missing}"], "does not exist; record a dataset"),
    "train, stop return without evaluation": (["train", "{config}", "--stop-return", "400"],
                                              "--stop-return needs evaluation"),
    "evaluate, missing checkpoint": (["evaluate", "{missing}"],
                                     "argument checkpoint: '{missing}' does not exist; name a "
                                     "checkpoint folder train wrote"),
    "evaluate, checkpoint is a file": (["evaluate", "{file}"],
                                       "argument checkpoint: '{file}' is a file"),
    "evaluate, not a checkpoint": (["evaluate", "{folder}"], "{folder}"),
    "evaluate, zero episodes": (["evaluate", "{folder}", "--episodes", "0"],
                                "argument --episodes: 0 is below 1; give at least 1"),
    "evaluate, negative seed": (["evaluate", "{folder}", "--seed", "-1"],
                                "argument --seed: -1 is below 0"),
    "datasets make, negative episodes": (
        ["datasets", "make", "CartPole-v1", "expert", "--out", "{missing}", "--episodes", "-3"],
        "argument --episodes: -3 is below 1; give at least 1"),
    "datasets make, unknown env": (
        ["datasets", "make", "Pong-v5", "expert", "--out", "{missing}"],
        "argument env: invalid choice: 'Pong-v5' (choose from 'CartPole-v1'"),
    "datasets make, unknown tier": (
        ["datasets", "make", "CartPole-v1", "best", "--out", "{missing}"],
        "argument tier: invalid choice: 'best'"),
    "datasets make, output is a file": (
        ["datasets", "make", "CartPole-v1", "expert", "--out", "{file}", "--episodes", "1"],
        "datasets make: output '{file}' is a file, not a folder"),
    "datasets make, output under a file": (
        ["datasets", "make", "CartPole-v1", "expert", "--out", "{file}/data", "--episodes", "1"],
        "datasets make: cannot write into output '{file}/data'"),
    "record, missing config": (["record", "{missing}", "{folder}"],
                               "argument config: config file '{missing}' does not exist"),
    "record, missing checkpoint": (["record", "{config}", "{missing}"],
                                   "argument checkpoint: '{missing}' does not exist"),
    "record, zero episodes": (["record", "{config}", "{folder}", "--episodes", "0"],
                              "argument --episodes: 0 is below 1"),
    "convert, unknown input format": (["convert", "{folder}", "{missing}", "--from", "csv"],
                                      "argument --from: invalid choice: 'csv'"),
    "inspect, missing dataset": (["inspect", "{missing}"], "'{missing}' does not exist"),
    "inspect, plot into a folder": (["inspect", "{folder}", "--plot", "{folder}"],
                                    "argument --plot: '{folder}' is a folder"),
    "inspect, unknown env": (["inspect", "{folder}", "--env", "NoSuchEnv-v0"],
                             "NameNotFound: Environment `NoSuchEnv` doesn't exist; check the env "
                             "id (gymnasium.pprint_registry() lists the registered ones)"),
    "plot, missing run": (["plot", "{missing}"], "argument run_dir: '{missing}' does not exist"),
    "plot, not a run": (["plot", "{folder}"], "{folder} has no result.json"),
    "plot, PNG in a missing folder": (["plot", "{folder}", "--out", "{missing}/curves.png"],
                                      "argument --out: the folder of '{missing}/curves.png' "
                                      "does not exist"),
}


@pytest.fixture()
def paths(tmp_path) -> dict[str, str]:
    (tmp_path / "file.txt").write_text("a file")
    (tmp_path / "folder").mkdir()
    BCConfig().environment("CartPole-v1").offline_data(
        input_=str(tmp_path / "data")).to_yaml(tmp_path / "bc.yaml")
    return {"file": str(tmp_path / "file.txt"), "folder": str(tmp_path / "folder"),
            "config": str(tmp_path / "bc.yaml"), "missing": str(tmp_path / "missing")}


@pytest.mark.parametrize(("argv", "expected"), CASES.values(), ids=CASES.keys())
def test_each_failure_ends_with_our_message_and_status_2(paths, capsys, argv, expected):
    root = Path(paths["file"]).parent
    before = {path: path.stat().st_mtime_ns for path in root.rglob("*")}
    assert main([arg.format(**paths) for arg in argv]) == 2
    stderr = capsys.readouterr().err
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("offline-rl: error: ") and expected.format(**paths) in last, last
    assert "Traceback" not in stderr
    assert {path: path.stat().st_mtime_ns for path in root.rglob("*")} == before, (
        "a failed command leaves every file and folder as it was")


def test_verbose_shows_the_traceback_of_an_unexpected_error(paths, capsys, monkeypatch):
    """An error we did not foresee still ends with the same last line, and --verbose shows
    where it came from."""
    import offline_rl.inspection

    def broken(*args, **kwargs):
        raise KeyError("surprise")

    monkeypatch.setattr(offline_rl.inspection, "inspect_dataset", broken)
    assert main(["inspect", paths["folder"]]) == 2
    quiet = capsys.readouterr().err
    assert quiet.strip().splitlines()[-1] == (
        "offline-rl: error: KeyError: 'surprise' (unexpected: rerun with --verbose for the "
        "traceback, and report it if the message does not say what to change)")
    assert "Traceback" not in quiet
    assert main(["inspect", "--verbose", paths["folder"]]) == 2
    verbose = capsys.readouterr().err
    assert "Traceback" in verbose and verbose.splitlines()[-1] == quiet.strip().splitlines()[-1]


def test_the_console_script_exits_2_and_writes_no_empty_dataset(tmp_path):
    """``datasets make --episodes -3`` once wrote an empty dataset and exited 0."""
    finished = subprocess.run(
        [sys.executable, "-m", "offline_rl.cli", "datasets", "make", "CartPole-v1", "expert",
         "--out", str(tmp_path / "data"), "--episodes", "-3"],
        capture_output=True, text=True, timeout=120)
    assert finished.returncode == 2
    assert finished.stderr.strip().splitlines()[-1] == (
        "offline-rl: error: argument --episodes: -3 is below 1; give at least 1")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("episodes", [0, -3, 2.5])
def test_the_python_api_refuses_nonsense_episode_counts_too(tmp_path, episodes):
    from offline_rl.datasets import make_dataset
    from offline_rl.errors import ConfigError
    from offline_rl.recording.recorder import Recorder

    with pytest.raises(ConfigError, match=rf"episodes={episodes!r}: a dataset needs a whole "
                                          "number of episodes, at least 1"):
        make_dataset("CartPole-v1", tmp_path / "data", episodes=episodes, progress=False)
    assert not (tmp_path / "data").exists()
    recorder = Recorder.__new__(Recorder)  # the count is checked before any actor is asked
    with pytest.raises(ConfigError, match=rf"record\(num_episodes={episodes!r}\): give a whole "
                                          "number of episodes, at least 1"):
        recorder.record(episodes)
