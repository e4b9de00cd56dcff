"""The checkpoint folder: ``config.yaml``, ``learner_state.pt`` and ``algorithm_state.json``.

Checkpoints are written to a temporary folder and renamed into place, so a crash mid-write never
leaves a half-written checkpoint under the final name. Loading reads tensors and plain data only,
from regular files inside the folder within size caps, and imports or calls nothing the config
names; a damaged file is a ``CheckpointError`` naming it.
Credentials in ``input_filesystem_kwargs``/``output_filesystem_kwargs`` (also those of
``evaluation_config``; options named like a key, secret, token, password or credential) are
never written: ``config.yaml`` says which were left out, and a restored config takes them from
the environment (``AWS_ACCESS_KEY_ID``, ...) unless the config is passed again.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import uuid
import warnings
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.algorithms.config_files import MAX_CONFIG_BYTES
from offline_rl.errors import (
    CheckpointError,
    CheckpointWriteError,
    ConfigError,
    DataNotFoundError,
    OutputError,
)
from offline_rl.file_checks import checked_file
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.names import (
    COMPONENT_LEARNER,
    COMPONENT_LEARNER_GROUP,
    COMPONENT_RL_MODULE,
    DEFAULT_MODULE_ID,
)
from offline_rl.recording.output_folder import some_paths

CONFIG_FILE = "config.yaml"
LEARNER_STATE_FILE = "learner_state.pt"
ALGORITHM_STATE_FILE = "algorithm_state.json"
#: The files a checkpoint folder holds: saving replaces a folder that holds only these.
CHECKPOINT_FILES = (CONFIG_FILE, LEARNER_STATE_FILE, ALGORITHM_STATE_FILE)
#: Key of ``algorithm_state.json`` saying why the config could not be saved.
NO_CONFIG_KEY = "config_not_saved"
#: Filesystem options never written to a checkpoint, by name.
CREDENTIAL_OPTION = re.compile(r"key|secret|token|password|credential", re.IGNORECASE)
#: What ``config.yaml`` holds in place of a credential.
NOT_SAVED = "<credential, not saved>"
FILESYSTEM_OPTIONS = ("input_filesystem_kwargs", "output_filesystem_kwargs")
#: Size caps of the files read from a checkpoint, in bytes (``config.yaml``'s is
#: ``config_files.MAX_CONFIG_BYTES``). The learner state of a [256, 256] MLP with Adam is ~1 MiB.
MAX_ALGORITHM_STATE_BYTES = 64 * 2**20
MAX_LEARNER_STATE_BYTES = 16 * 2**30
#: RLlib's path of the module inside a checkpoint, outermost first: a checkpoint's
#: ``learner_group/learner/rl_module`` (and the paths above it) name its parts, as in RLlib.
COMPONENT_PATH = (COMPONENT_LEARNER_GROUP, COMPONENT_LEARNER, COMPONENT_RL_MODULE,
                  DEFAULT_MODULE_ID)
#: The counters ``algorithm_state.json`` holds.
COUNTERS = ("training_iteration", "num_env_steps_trained_lifetime", "num_updates_lifetime")


def write_checkpoint(path: str | Path, learner: Any, config: AlgorithmConfig,
                     algorithm_state: dict[str, Any]) -> Path:
    """Writes a checkpoint folder at ``path`` (replacing an older one); returns the path.

    Raises ``OutputError`` when ``path`` is a file, or a folder holding anything but a
    checkpoint's files (those are never deleted); ``CheckpointWriteError`` naming the path and
    the free space when the files cannot be written (a full disk, say): the staging folder is
    removed and an older checkpoint at ``path`` stays as it was."""
    target = Path(path)
    check_checkpoint_path(target)
    return _write_staged(target, lambda staging: _write_files(staging, learner, config,
                                                              algorithm_state, target))


def write_multi_agent_checkpoint(path: str | Path, config: AlgorithmConfig,
                                 algorithm_state: dict[str, Any],
                                 modules: dict[str, Callable[[Path], Any]]) -> Path:
    """Writes a multi-agent checkpoint folder at ``path``: the config and counters, and a
    checkpoint folder per trained module, which ``modules[module_id](folder)`` writes (see
    ``write_checkpoint``, whose errors and safety it shares: a folder at ``path`` is replaced
    only when it holds a checkpoint's files and its modules' checkpoint folders)."""
    target = Path(path)
    check_checkpoint_path(target, module_folders=modules)

    def write(staging: Path) -> None:
        _write_config_and_state(staging, config, algorithm_state, target, stacklevel=6)
        for module_id, save in modules.items():
            save(staging / module_id)

    return _write_staged(target, write)


def _write_staged(target: Path, write: Callable[[Path], None]) -> Path:
    """Runs ``write`` into a staging folder beside ``target``, then puts it in ``target``'s
    place (an older checkpoint there is removed only then)."""
    staging = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex}")
    try:
        staging.mkdir(parents=True)
        write(staging)
    except (OSError, RuntimeError) as error:  # torch reports a full disk as a RuntimeError
        shutil.rmtree(staging, ignore_errors=True)
        free = shutil.disk_usage(target.parent if target.parent.exists() else Path.cwd()).free
        raise CheckpointWriteError(
            f"could not write the checkpoint {target} ({error}); {free / 2**20:.1f} MiB are free "
            "on its disk. Free space or save elsewhere; an older checkpoint there is intact"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    previous = target.with_name(f".{target.name}.old-{uuid.uuid4().hex}")
    if target.exists():
        target.rename(previous)
    staging.rename(target)
    shutil.rmtree(previous, ignore_errors=True)
    return target


def check_checkpoint_path(target: Path, *, module_folders: Collection[str] = ()) -> None:
    """Raises ``OutputError`` when a checkpoint cannot be saved to ``target`` without losing a
    user's file: it is a file, or a folder whose entries are not all a checkpoint's files, or
    (a multi-agent checkpoint's) folders of ``module_folders`` holding only those (saving
    replaces the folder)."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise OutputError(f"cannot save a checkpoint to {target}: it is a file (or a link), not "
                          "a checkpoint folder; save to another path")
    if not target.is_dir():
        return
    def is_checkpoints(entry: Path) -> bool:
        if entry.is_symlink():
            return False
        if entry.name in module_folders and entry.is_dir():
            check_checkpoint_path(entry)
            return True
        return entry.name in CHECKPOINT_FILES and entry.is_file()

    foreign = sorted(entry.name for entry in target.iterdir() if not is_checkpoints(entry))
    if foreign:
        raise OutputError(
            f"cannot save a checkpoint to {target}: that folder holds what a checkpoint does not "
            f"({some_paths(foreign)}) and saving replaces the folder; save to another path, or "
            "move them away")


def _write_config(config: AlgorithmConfig, file: Path) -> None:
    """``config`` as YAML, credentials left out (and listed in a comment at the top), with
    every ``model_config`` key written out, so that a later version's defaults cannot change
    the module the checkpoint restores."""
    config = config.copy()
    rl_module = config.sections.rl_module
    rl_module.model_config = DefaultModelConfig.from_dict(rl_module.model_config).to_dict()
    left_out = []
    for field, options, replace in _filesystem_options(config):
        for name in options:
            if CREDENTIAL_OPTION.search(name):
                options[name] = NOT_SAVED
                left_out.append(f"{field}[{name!r}]")
        replace(options)
    config.to_yaml(file)
    if left_out:
        file.write_text(f"# Credentials are never saved: {', '.join(left_out)}. On restore they "
                        "come from the environment, or pass the config again.\n"
                        + file.read_text())


def _filesystem_options(config: AlgorithmConfig
                        ) -> list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], None]]]:
    """Each dict of filesystem options in ``config`` (the ``offline_data`` fields, and those
    ``evaluation_config`` overrides): its name, a copy, and how to put a new one in place."""
    data_options = config.sections.offline_data
    found = [(field, dict(getattr(data_options, field)),
              functools.partial(setattr, data_options, field)) for field in FILESYSTEM_OPTIONS]
    overrides = config.sections.evaluation.evaluation_config
    found += [(f"evaluation_config[{field!r}]", dict(overrides[field]),
               functools.partial(overrides.__setitem__, field))
              for field in FILESYSTEM_OPTIONS if isinstance(overrides.get(field), dict)]
    return found


def _without_credentials(config: AlgorithmConfig, path: str | Path) -> AlgorithmConfig:
    """Drops the options ``_write_config`` left out, so the filesystem looks for credentials
    in the environment, and says so."""
    for field, options, replace in _filesystem_options(config):
        left_out = [name for name, value in options.items() if value == NOT_SAVED]
        if left_out:
            replace({name: value for name, value in options.items() if name not in left_out})
            warnings.warn(f"checkpoint {path} holds no {field} {left_out} (credentials are never "
                          "saved): the filesystem takes them from the environment (e.g. "
                          "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); to give them, pass the "
                          "config: Algorithm.from_checkpoint(path, config=...)", UserWarning,
                          stacklevel=3)
    return config


def _write_files(staging: Path, learner: Any, config: AlgorithmConfig,
                 algorithm_state: dict[str, Any], target: Path) -> None:
    learner.save_state(staging / LEARNER_STATE_FILE)
    _write_config_and_state(staging, config, algorithm_state, target, stacklevel=8)


def _write_config_and_state(staging: Path, config: AlgorithmConfig,
                            algorithm_state: dict[str, Any], target: Path,
                            stacklevel: int) -> None:
    """Writes the config (or, when YAML cannot hold it, says why in the state, warning the
    caller ``stacklevel`` frames up) and the state."""
    try:
        _write_config(config, staging / CONFIG_FILE)
    except ConfigError as error:  # e.g. a lambda as env creator: YAML cannot hold it
        algorithm_state = {**algorithm_state, NO_CONFIG_KEY: error.message}
        warnings.warn(f"checkpoint {target} has no {CONFIG_FILE}: {error.message}. Loading it "
                      "will need the config: Algorithm.from_checkpoint(path, config=...)",
                      UserWarning, stacklevel=stacklevel)
    (staging / ALGORITHM_STATE_FILE).write_text(json.dumps(algorithm_state, indent=2))


def component_of(path: str | Path) -> tuple[Path, str | None]:
    """The checkpoint folder ``path`` is in, and the component it names: a checkpoint folder
    itself names none (``None``); RLlib's path of one of its components,
    ``<checkpoint>/learner_group/learner/rl_module`` (or ``.../rl_module/default_policy``,
    ``.../learner_group/learner``, ``.../learner_group``), names that component's path, e.g.
    ``"learner_group/learner/rl_module"``. offline-rl's checkpoints keep every component in
    their three files, so those folders need not exist.

    Examples:
        >>> component_of("ckpt/learner_group/learner/rl_module")
        (PosixPath('ckpt'), 'learner_group/learner/rl_module')
    """
    folder = Path(path)
    if not (folder / ALGORITHM_STATE_FILE).exists():
        for depth in range(len(COMPONENT_PATH), 0, -1):
            if folder.parts[-depth:] == COMPONENT_PATH[:depth]:
                return folder.parents[depth - 1], "/".join(COMPONENT_PATH[:depth])
    return folder, None


def read_algorithm_state(path: str | Path) -> dict[str, Any]:
    """The counters saved with a checkpoint; ``CheckpointError`` naming the file when it is
    damaged (not JSON, nested past a bound, counters that are not counts)."""
    state = _read_state_json(path)
    file = Path(path) / ALGORITHM_STATE_FILE
    for counter in COUNTERS:
        if not _is_count(state.get(counter)):
            raise CheckpointError(f"{file} is damaged: {counter} is {state.get(counter)!r}, not "
                                  "a count")
    position = state.get("data_position")
    if position is not None and not _is_data_position(position):
        raise CheckpointError(f"{file} is damaged: data_position is {position!r}, not where a "
                              "data stream stood; restore without it with "
                              "restore_from_path(path, component='learner_group')")
    return state


def other_algorithm(path: str | Path, state: dict[str, Any], this: str) -> str | None:
    """What to say when the checkpoint at ``path`` (its ``read_algorithm_state``) was saved by
    another algorithm than ``this``; ``None`` when it was not."""
    saved = state.get("algorithm")
    if not isinstance(saved, str) or saved == this:
        return None
    return (f"{path} is a checkpoint of {saved}, and this algorithm is {this}: restore it with "
            f"Algorithm.from_checkpoint(path), which builds {saved} from the config saved with "
            "it")


def _is_data_position(position: Any) -> bool:
    """Whether ``position`` is a ``LearnerGroup.data_position()``: one learner's stream
    position, or ``{"learners": [...]}`` of each remote learner's (or ``None``)."""
    learners = position.get("learners") if isinstance(position, dict) else None
    if isinstance(learners, list):
        return all(one is None or _is_stream_position(one) or _is_mix_position(one)
                   for one in learners)
    return _is_stream_position(position) or _is_mix_position(position)


def _is_stream_position(position: Any) -> bool:
    """Whether ``position`` is a ``BatchStream.saved_position()``."""
    return (isinstance(position, dict) and isinstance(position.get("ended"), bool)
            and all(_is_count(position.get(name)) for name in ("epoch", "rows",
                                                               "epochs_completed"))
            and _is_counts(position.get("epoch_rows")))


def _is_mix_position(position: Any) -> bool:
    """Whether ``position`` is a ``MixedStream.saved_position()``: each source's stream
    position, and the mix's counts."""
    mix = position.get("mix") if isinstance(position, dict) else None
    return (isinstance(mix, dict) and isinstance(mix.get("sources"), list)
            and all(_is_stream_position(source) for source in mix["sources"])
            and all(_is_count(mix.get(name)) for name in ("batches", "reported_epochs",
                                                          "epochs_completed"))
            and _is_counts(mix.get("taken")) and _is_counts(mix.get("epoch_rows"))
            and len(mix["taken"]) == len(mix["sources"]))


def _is_counts(values: Any) -> bool:
    return isinstance(values, list) and all(_is_count(value) for value in values)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read_state_json(path: str | Path) -> dict[str, Any]:
    file = _checkpoint_file(path, ALGORITHM_STATE_FILE, MAX_ALGORITHM_STATE_BYTES)
    try:
        state = json.loads(file.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{file} is damaged: not JSON ({error})") from None
    except RecursionError:
        raise CheckpointError(f"{file} is damaged: it nests too deep to be the counters "
                              "offline-rl writes") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{file} is damaged: it holds {type(state).__name__}, not the "
                              "mapping of counters offline-rl writes")
    return state


def restore_random_states(path: str | Path, states: dict[str, Any]) -> None:
    """Sets this process's random number generators to ``states`` (``algorithm_state.json``'s
    ``rng_states``); ``CheckpointError`` naming the file when they are damaged."""
    from offline_rl.core.random_states import set_random_states  # imports torch

    try:
        set_random_states(states)
    except (TypeError, ValueError, IndexError, KeyError, RuntimeError, OverflowError) as error:
        raise CheckpointError(
            f"{Path(path) / ALGORITHM_STATE_FILE} is damaged: its rng_states cannot be restored "
            f"({type(error).__name__}: {error}); restore without them with "
            "restore_from_path(path, component='learner_group')") from None


def read_config(path: str | Path) -> AlgorithmConfig:
    """The config saved with a checkpoint (read without importing or calling anything it
    names, see ``config_files``)."""
    _checkpoint_folder(path)
    if not (Path(path) / CONFIG_FILE).exists():
        reason = _read_state_json(path).get(NO_CONFIG_KEY, "it was not saved")
        raise DataNotFoundError(f"{path} has no {CONFIG_FILE} ({reason}); pass the config: "
                                "Algorithm.from_checkpoint(path, config=...)")
    config_file = _checkpoint_file(path, CONFIG_FILE, MAX_CONFIG_BYTES)
    return _without_credentials(AlgorithmConfig.from_yaml(config_file), path)


def learner_state_file(path: str | Path) -> Path:
    """The torch file with module weights and optimizer state (checked to be a regular file
    inside the checkpoint, within ``MAX_LEARNER_STATE_BYTES``)."""
    return _checkpoint_file(path, LEARNER_STATE_FILE, MAX_LEARNER_STATE_BYTES)


def load_module(path: str | Path) -> Any:
    """The trained policy module of a checkpoint, on CPU, without starting Ray."""
    from offline_rl.core.state_file import load_state_file

    config = read_config(path)
    multi_agent = config.sections.multi_agent
    if multi_agent.is_multi_agent and not (Path(path) / LEARNER_STATE_FILE).exists():
        raise ConfigError(f"{path} is a multi-agent checkpoint, a checkpoint folder per module "
                          f"({multi_agent.trained_modules}): load one with "
                          "load_module(path / module_id)")
    environment = config.sections.environment
    spec = config.get_rl_module_spec(environment.observation_space, environment.action_space)
    module = spec.build()
    state = load_state_file(learner_state_file(path))
    module.load_state_dict(state["module"])
    return module.eval()


def _checkpoint_folder(path: str | Path) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise DataNotFoundError(f"{path} is not an offline-rl checkpoint: "
                                f"{'it is a file' if folder.exists() else 'it does not exist'}"
                                "; give the checkpoint folder (it holds "
                                f"{CONFIG_FILE} and {LEARNER_STATE_FILE})")
    return folder


def _checkpoint_file(path: str | Path, name: str, max_bytes: int) -> Path:
    file = _checkpoint_folder(path) / name
    if not file.exists() and not file.is_symlink():
        raise DataNotFoundError(f"{path} is not an offline-rl checkpoint: {name} is missing")
    return checked_file(file, max_bytes=max_bytes, error=CheckpointError, folder=path)

