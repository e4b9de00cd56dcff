"""No command or API deletes or overwrites a file it did not write (issue 35, class 4).

``datasets make``, ``convert``, recording (``Recorder``, ``offline_data(output=...)``) and
checkpoint saving refuse a folder holding the user's files unless told ``overwrite``; then, and
when they write again, the user's files stay byte for byte as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from offline_rl import BCConfig
from offline_rl.cli import main
from offline_rl.datasets import make_dataset
from offline_rl.errors import OutputError
from offline_rl.recording.convert import tabular_to_episodes
from offline_rl.recording.manifests import MANIFEST_FOLDER
from offline_rl.recording.recorder import Recorder
from tests.policies import alternating

TABULAR = Path(__file__).parent / "fixtures" / "rllib_cartpole_tabular"
USER_FILES = {"notes.txt": b"my notes", "sub/keep.txt": b"keep me", "sub/deeper/data.parquet":
              b"not ours"}


def plant_user_files(folder: Path) -> dict[Path, str]:
    """Writes the user's files into ``folder``; returns each one's hash."""
    for name, content in USER_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    return file_hashes(folder / name for name in USER_FILES)


def file_hashes(files) -> dict[Path, str]:
    return {Path(file): hashlib.sha256(Path(file).read_bytes()).hexdigest() for file in files}


def data_files(folder: Path) -> list[Path]:
    """The Parquet files offline-rl wrote under ``folder`` (not the user's, not hidden ones)."""
    return sorted(file for file in folder.rglob("*.parquet")
                  if file.relative_to(folder).as_posix() not in USER_FILES
                  and not any(part.startswith(".") for part in file.relative_to(folder).parts))


def make(entry: str, out: Path, capsys, *, episodes: int = 2, seed: int = 0,
         overwrite: bool = False) -> str | None:
    """``datasets make`` through the Python API or the command line; the error's message, or
    ``None`` when it succeeded."""
    if entry == "api":
        try:
            make_dataset("CartPole-v1", out, tier="random", episodes=episodes, seed=seed,
                         progress=False, overwrite=overwrite)
        except OutputError as error:
            return str(error)
        return None
    status = main(["datasets", "make", "CartPole-v1", "random", "--out", str(out), "--episodes",
                   str(episodes), "--seed", str(seed), *(["--overwrite"] if overwrite else [])])
    stderr = capsys.readouterr().err
    if status == 0:
        return None
    assert status == 2 and "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("offline-rl: error: ")
    return last


@pytest.mark.parametrize("entry", ["api", "cli"])
def test_datasets_make_into_a_folder_of_user_files_needs_overwrite_and_keeps_them(
        tmp_path, capsys, entry):
    out = tmp_path / "data"
    user = plant_user_files(out)
    refused = make(entry, out, capsys)
    assert refused is not None
    assert (f"datasets make: output {str(out)!r} holds 3 files offline-rl did not write "
            "(notes.txt, sub/deeper/data.parquet, sub/keep.txt); rerun with --overwrite") in refused
    assert sorted(path.name for path in out.iterdir()) == ["notes.txt", "sub"]  # nothing added
    with pytest.warns(UserWarning, match=r"keeps 1 file of data offline-rl did not write "
                                         r"\(sub/deeper/data\.parquet\); whatever reads"):
        assert make(entry, out, capsys, overwrite=True) is None
    first = data_files(out)
    assert first and file_hashes(user) == user
    assert make(entry, out, capsys, episodes=3, seed=1, overwrite=True) is None
    second = data_files(out)
    assert not set(first) & set(second), "the earlier dataset's files are replaced"
    assert sum(pq.read_metadata(file).num_rows for file in second) == json.loads(
        (out / "dataset.json").read_text())["num_env_steps"]
    assert file_hashes(user) == user


def test_datasets_make_needs_the_word_to_replace_an_earlier_dataset(tmp_path, capsys):
    out = tmp_path / "data"
    assert make("api", out, capsys) is None
    earlier = file_hashes([*data_files(out), out / "dataset.json"])
    refused = make("cli", out, capsys)
    assert refused is not None and "holds the output of an earlier offline-rl run (2 files: " \
        "cartpole-v1/run-" in refused and "--overwrite" in refused
    assert file_hashes(earlier) == earlier


def test_datasets_make_never_replaces_a_card_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "data"
    out.mkdir()
    (out / "dataset.json").write_text('{"mine": true}')
    mine = file_hashes([out / "dataset.json"])
    refused = make("api", out, capsys, overwrite=True)
    assert refused is not None and "dataset.json was not written by offline-rl" in refused
    assert file_hashes(mine) == mine


def test_a_manifest_naming_files_outside_its_folder_deletes_nothing_there(tmp_path, capsys):
    out = tmp_path / "data"
    victim = tmp_path / "victim.txt"
    victim.write_text("outside")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("outside too")
    (out / MANIFEST_FOLDER).mkdir(parents=True)
    (out / "link").symlink_to(tmp_path / "elsewhere")
    (out / MANIFEST_FOLDER / "crafted.json").write_text(json.dumps(
        {"files": ["../victim.txt", str(victim), f"{MANIFEST_FOLDER}/../../victim.txt",
                   "link/secret.txt"]}))
    user = plant_user_files(out)
    assert make("api", out, capsys, overwrite=True) is None
    assert victim.read_text() == "outside" and file_hashes(user) == user
    assert (tmp_path / "elsewhere" / "secret.txt").read_text() == "outside too"


def manifest_of(out: Path) -> tuple[Path, dict]:
    """The one manifest in ``out`` and its content."""
    (path,) = (out / MANIFEST_FOLDER).glob("*.json")
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("entry", ["api", "cli"])
def test_a_forged_manifest_listing_user_files_by_name_and_size_deletes_none(tmp_path, capsys,
                                                                           entry):
    out = tmp_path / "data"
    user = plant_user_files(out)
    forged = {"format": "offline-rl manifest", "version": 2, "files": {
        name: {"size": len(content), "sha256": hashlib.sha256(b"offline-rl's").hexdigest()}
        for name, content in USER_FILES.items()}}
    (out / MANIFEST_FOLDER).mkdir()
    (out / MANIFEST_FOLDER / "forged.json").write_text(json.dumps(forged))
    with pytest.warns(UserWarning) as warned:
        assert make(entry, out, capsys, overwrite=True) is None
    kept = [str(warning.message) for warning in warned if "replaced only" in str(warning.message)]
    assert len(kept) == 1 and "kept notes.txt (its content is not what offline-rl wrote (edited " \
        "or replaced since)); sub/deeper/data.parquet (its content" in kept[0]
    assert file_hashes(user) == user and (out / MANIFEST_FOLDER / "forged.json").exists()


def test_a_tampered_manifest_or_a_replaced_file_deletes_nothing_of_the_users(tmp_path, capsys):
    out = tmp_path / "data"
    assert make("api", out, capsys) is None
    path, manifest = manifest_of(out)
    ours = sorted(manifest["files"])
    user = plant_user_files(out)
    (out / ours[0]).unlink()  # the user put a file of their own under one of offline-rl's names
    (out / ours[0]).write_bytes(b"the user's data now")
    manifest["files"]["notes.txt"] = {"size": len(USER_FILES["notes.txt"]),
                                      "sha256": manifest["files"][ours[1]]["sha256"]}
    path.write_text(json.dumps(manifest))
    user |= file_hashes([out / ours[0]])
    with pytest.warns(UserWarning, match=r"kept .*notes\.txt \(its content is not what "
                                         r"offline-rl wrote"):
        assert make("api", out, capsys, seed=1, overwrite=True) is None
    assert file_hashes(user) == user
    assert ours[1] == "dataset.json" and json.loads((out / ours[1]).read_text())["seed"] == 1


def test_a_symlinked_manifest_folder_is_refused_and_its_target_kept(tmp_path, capsys):
    out, elsewhere = tmp_path / "data", tmp_path / "settings"
    elsewhere.mkdir()
    (elsewhere / "keep.json").write_text('{"files": ["../notes.txt"]}')
    (elsewhere / "settings.json").write_text('{"theme": "dark"}')
    out.mkdir()
    (out / MANIFEST_FOLDER).symlink_to(elsewhere)
    user = {**plant_user_files(out), **file_hashes(elsewhere.iterdir())}
    refused = make("cli", out, capsys, overwrite=True)
    assert refused == (f"offline-rl: error: datasets make: {out}/{MANIFEST_FOLDER} is a symbolic "
                       f"link (to {str(elsewhere)!r}); offline-rl never writes, reads or deletes "
                       "through one: remove the link itself (its target is not touched) or "
                       "choose another folder")
    assert file_hashes(user) == user and sorted(p.name for p in elsewhere.iterdir()) == [
        "keep.json", "settings.json"]


def test_a_listed_symlink_or_an_oversized_manifest_proves_nothing(tmp_path, capsys):
    out = tmp_path / "data"
    user = plant_user_files(out)
    (out / "link.txt").symlink_to(out / "notes.txt")  # listed with the user file's own hash
    (out / MANIFEST_FOLDER).mkdir()
    (out / MANIFEST_FOLDER / "linked.json").write_text(json.dumps({
        "format": "offline-rl manifest", "version": 2, "files": {"link.txt": {
            "size": len(USER_FILES["notes.txt"]),
            "sha256": hashlib.sha256(USER_FILES["notes.txt"]).hexdigest()}}}))
    with open(out / MANIFEST_FOLDER / "huge.json", "wb") as huge:  # sparse: no disk used
        huge.truncate(900 * 1024 * 1024)
    refused = make("api", out, capsys)
    assert refused is not None and ("holds 3 files offline-rl did not write (notes.txt, "
                                    "sub/deeper/data.parquet, sub/keep.txt); .offline-rl/huge.json "
                                    "cannot prove any file offline-rl's (it is 943,718,400 bytes, "
                                    "more than the 8,388,608 a manifest may have)") in refused
    with pytest.warns(UserWarning, match=r"kept \.offline-rl/huge\.json \(not used: it is "
                                         r".*; link\.txt \(it is not a regular file"):
        assert make("api", out, capsys, overwrite=True) is None
    assert (out / "link.txt").is_symlink() and file_hashes(user) == user


def test_output_that_is_a_file_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "data"
    out.write_bytes(b"a file")
    refused = make("cli", out, capsys)
    assert refused == (f"offline-rl: error: datasets make: output {str(out)!r} is a file, not a "
                       "folder; name a folder (new or empty) to write into")
    assert out.read_bytes() == b"a file"


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_convert_into_a_folder_of_user_files_needs_overwrite_and_keeps_them(ray_session,
                                                                            tmp_path):
    out = tmp_path / "episodes"
    user = plant_user_files(out)
    with pytest.raises(OutputError, match=r"convert: output .* holds 3 files offline-rl did not "
                                          r"write \(notes\.txt, .*\); rerun with --overwrite"):
        tabular_to_episodes(str(TABULAR), str(out))
    first = tabular_to_episodes(str(TABULAR), str(out), overwrite=True)["files"]
    again = tabular_to_episodes(str(TABULAR), str(out), overwrite=True, incomplete="drop")
    assert [Path(file) for file in again["files"]] == data_files(out)
    assert not set(first) & set(again["files"])
    assert file_hashes(user) == user


def recording_config(output: Path, input_: str | None = None) -> BCConfig:
    return (BCConfig().environment("CartPole-v1")
            .env_runners(num_env_runners=1, num_cpus_per_env_runner=0)
            .offline_data(input_=input_, output=str(output), output_write_episodes=True)
            .debugging(seed=0))


def record(config: BCConfig, episodes: int, **kwargs) -> list[str]:
    with Recorder(config.recorder_config(), alternating, **kwargs) as recorder:
        recorder.record(episodes, progress=False)
        return recorder.stop()


@pytest.mark.timeout(180)
def test_recording_again_or_at_once_into_one_folder_keeps_every_run(ray_session, tmp_path):
    config = recording_config(tmp_path / "rec")
    first = record(config, 2)
    second = record(config, 2)  # its own run: the first one's files stay
    at_once: list[list[str]] = []
    threads = [threading.Thread(target=lambda: at_once.append(record(config, 3)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    written = [*first, *second, *at_once[0], *at_once[1]]
    assert len(set(written)) == len(written) and sorted(map(Path, written)) == data_files(
        tmp_path / "rec")
    assert sum(pq.read_metadata(file).num_rows for file in written) == 2 + 2 + 3 + 3
    assert len(list((tmp_path / "rec" / MANIFEST_FOLDER).glob("*.json"))) == 4


@pytest.mark.timeout(180)
def test_recording_into_a_folder_of_user_files_needs_overwrite_and_keeps_them(ray_session,
                                                                              tmp_path):
    out = tmp_path / "rec"
    user = plant_user_files(out)
    with pytest.raises(OutputError, match=r"recording: output .* holds 3 files offline-rl did "
                                          r"not write \(notes\.txt, .*--overwrite"):
        record(recording_config(out), 2)
    assert record(recording_config(out), 2, overwrite=True)
    assert file_hashes(user) == user


def test_recording_into_the_training_input_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    assert make("api", data, capsys) is None
    dataset = file_hashes(data_files(data))
    for output in (data, data / "recorded"):
        config = recording_config(output, input_=str(data))
        with pytest.raises(OutputError, match=r"is the training input .* or inside it"):
            Recorder(config.recorder_config(), alternating, input_=config.input_)
        with pytest.raises(OutputError, match=r"is the training input"):
            config.build()
    assert file_hashes(data_files(data)) == dataset and not (data / "recorded").exists()


def test_recording_into_any_input_of_the_config_is_refused_however_it_is_named(
        tmp_path, capsys, monkeypatch):
    # A tabular input folder (RLlib's layout), named in every way a config may name it; the
    # recording would be episodes. Refused by the Python API, build() and `offline-rl record`.
    data = tmp_path / "data"
    shutil.copytree(TABULAR, data)
    (tmp_path / "link").symlink_to(data, target_is_directory=True)
    (tmp_path / "checkpoint").mkdir()  # never loaded: the output is checked first
    monkeypatch.chdir(tmp_path)
    one_file = str(next(data.rglob("*.parquet")))
    before = {file: file.read_bytes() for file in tmp_path.rglob("*") if file.is_file()}
    cases = [  # (input_, evaluation_config's input_, output, how the error says it)
        ("data", None, f"{data}/", "is the training input 'data' or inside it"),
        (f"{data}/", None, f"file://{data}", f"is the training input '{data}/' or inside it"),
        (f"file://{data}", None, "./data/recorded/",
         f"is the training input 'file://{data}' or inside it"),
        (f"{data}/cartpoleenv/*/*.parquet", None, "data/cartpoleenv",
         f"is the training input '{data}/cartpoleenv/*/*.parquet' or inside it"),
        ({str(TABULAR): 0.5, "link": 0.5}, None, str(data),
         "is the training input 'link' or inside it"),
        ([{"input_": [str(TABULAR), f"{tmp_path}/link/"], "weight": 1}], None, "data/new",
         f"is the training input '{tmp_path}/link/' or inside it"),
        (one_file, None, "data", f"holds the training input {one_file!r}"),
        (str(TABULAR), str(data), "link/recorded", "is the evaluation input "
         f"(evaluation_config['input_']) {str(data)!r} or inside it"),
    ]
    for input_, held_out, output, says in cases:
        config = recording_config(Path(output), input_=input_).evaluation(
            evaluation_config={"input_": held_out} if held_out else {})
        config.offline_data(output=output)
        shown = os.path.abspath(output) if "://" not in output else output
        message = (f"recording: output {shown!r} {says}; recording there would mix new "
                   "episodes with the data trained or evaluated on: choose another folder")
        with pytest.raises(OutputError, match=f"^{re.escape(message)}$"):
            Recorder(config.recorder_config(), alternating, input_=input_,
                     evaluation_input=held_out)
        with pytest.raises(OutputError, match=re.escape(says)):
            config.build()
        config.to_yaml(tmp_path / "record.yaml")
        assert main(["record", "record.yaml", "checkpoint", "--output", output,
                     "--overwrite"]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"offline-rl: error: {message}"
        (tmp_path / "record.yaml").unlink()
        assert {file: file.read_bytes() for file in tmp_path.rglob("*")
                if file.is_file()} == before, input_


@pytest.mark.timeout(180)
def test_saving_a_checkpoint_never_replaces_a_user_folder_or_file(ray_session, bc_config,
                                                                  tmp_path):
    folder = tmp_path / "checkpoint"
    user = plant_user_files(folder)
    (tmp_path / "a-file").write_bytes(b"mine")
    with bc_config.build() as algo:
        algo.train()
        with pytest.raises(OutputError, match=r"that folder holds what a checkpoint does not "
                                              r"\(notes\.txt, sub\)"):
            algo.save_to_path(folder)
        with pytest.raises(OutputError, match=r"a-file: it is a file"):
            algo.save_to_path(tmp_path / "a-file")
        for _ in range(2):  # a checkpoint of its own is replaced
            algo.save_to_path(tmp_path / "mine")
    assert file_hashes(user) == user and (tmp_path / "a-file").read_bytes() == b"mine"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file", "checkpoint", "mine"]


def test_train_refuses_a_user_folder_where_its_checkpoint_goes_before_training(tmp_path, capsys):
    config_file = tmp_path / "bc.yaml"
    BCConfig().environment("CartPole-v1").offline_data(
        input_=str(tmp_path / "data")).to_yaml(config_file)
    user = plant_user_files(tmp_path / "run" / "checkpoint")
    assert main(["train", str(config_file), "--output-dir", str(tmp_path / "run")]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"offline-rl: error: cannot save a checkpoint to "
                           f"{tmp_path / 'run' / 'checkpoint'}: that folder holds")
    assert file_hashes(user) == user


def test_train_never_replaces_earlier_results_without_the_word(tmp_path, capsys):
    config_file = tmp_path / "bc.yaml"
    BCConfig().environment("CartPole-v1").offline_data(
        input_=str(tmp_path / "data")).to_yaml(config_file)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "progress.csv").write_text("my results")
    assert main(["train", str(config_file), "--output-dir", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"offline-rl: error: --output-dir {tmp_path / 'run'} already holds progress.csv (an "
        "earlier run's results?) and training would replace them: continue that run with "
        f"--resume {tmp_path / 'run'}, choose another --output-dir, or pass --overwrite to "
        "replace them")
    assert (tmp_path / "run" / "progress.csv").read_text() == "my results"


#: Runs ``datasets make`` (CLI) or a recording env runner into ``argv[1]`` with writes failing
#: past 2 kB (``RLIMIT_FSIZE``: a file too large, EFBIG, as a full disk fails a write).
FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from offline_rl.cli import main
from offline_rl.errors import OutputError
from offline_rl.recording.recorder import _EnvRunner
from tests.policies import alternating
from tests.test_user_files import recording_config

def fill_disk():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

if sys.argv[2] == "datasets make":
    fill_disk()
    sys.exit(main(["datasets", "make", "CartPole-v1", "random", "--out", sys.argv[1],
                   "--episodes", "200", "--overwrite"]))
config = recording_config(Path(sys.argv[1])).offline_data(output_max_rows_per_file=5)
runner = _EnvRunner(config.recorder_config(), alternating, 0, "run-0")
runner.record(20)  # files of 5 episodes
fill_disk()
try:
    runner.record(200)
except OutputError as error:
    print(error)
print(len(runner.stop()))
"""


@pytest.mark.parametrize("writer", ["datasets make", "recording env runner 0"])
def test_a_write_that_fails_names_the_folder_and_keeps_whole_files_only(tmp_path, writer):
    out = tmp_path / "data"
    user = plant_user_files(out)
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(out), writer], text=True,
                          capture_output=True, timeout=120, cwd=Path(__file__).parent.parent)
    lines = (done.stderr if writer == "datasets make" else done.stdout).strip().splitlines()
    error = lines[-1] if writer == "datasets make" else lines[-2]
    assert f"{writer}: writing into {str(out)!r} failed ([Errno 27] " in error
    assert "MiB are free on the folder's disk. Free space (or raise the file size limit)" in error
    assert file_hashes(user) == user
    if writer == "datasets make":
        assert done.returncode == 2 and "nothing of this dataset was kept" in error
        assert data_files(out) == [] and not (out / "dataset.json").exists()
    else:
        kept = int(lines[-1])
        assert kept >= 1 and f"the {kept} whole file(s) it wrote before are kept" in error
        assert len(data_files(out)) == kept
        assert all(pq.read_metadata(file).num_rows for file in data_files(out))
