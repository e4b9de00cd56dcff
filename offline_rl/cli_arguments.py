"""The ``offline-rl`` command line's argument types, parser and error messages: every failure
ends with ``offline-rl: error: <what, where, how to fix>`` and exit status 2.

Example:
    >>> positive = count(1)
    >>> positive("3")
    3
    >>> positive("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 0 is below 1; give at least 1
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


def import_modules(names: list[str]) -> None:
    """``--import``: the user's own modules (their PreLearner, module or env classes), imported
    on their word so that a config may name classes in them; offline-rl never imports what a
    file names."""
    import importlib

    from offline_rl.errors import ConfigError

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ConfigError(f"--import {name}: {error}; is it installed, or on PYTHONPATH?"
                              ) from None


def describe(error: Exception) -> str:
    """The message of a failed command: ours as raised; a file system error with its path
    and reason; anything else with its type and where to see more."""
    from offline_rl.errors import find_error

    ours = find_error(error)
    if ours is not None:
        return ours.message or str(ours)
    if type(error).__module__.startswith("gymnasium"):  # e.g. an env id that is not registered
        return (f"{type(error).__name__}: {str(error).rstrip('.')}; check the env id (gymnasium."
                "pprint_registry() lists the registered ones)")
    if isinstance(error, OSError):
        if error.filename is None:  # a message of its own, naming the path
            return str(error)
        return (f"{error.filename}: {error.strerror or error}; check that the path exists and "
                "that you may read (or, for an output, write) it")
    return (f"{type(error).__name__}: {error} (unexpected: rerun with --verbose for the "
            "traceback, and report it if the message does not say what to change)")


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors end with ``offline-rl: error:`` in every
    subcommand too (argparse would name the subcommand's program), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"offline-rl: error: {message}\n")


def count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}; give at least "
                                             f"{minimum}")
        return value

    parse.__name__ = "count"  # argparse names the type in its "invalid <type> value" message
    return parse


def finite(text: str) -> float:
    """An argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def config_file(text: str) -> Path:
    """An argparse type: an existing regular file (a YAML config)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"config file {text!r} does not exist; see configs/ "
                                         "for examples")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"config {text!r} is not a file (a folder?); name the "
                                         "YAML file itself")
    return path


def folder(what: str) -> Callable[[str], Path]:
    """An argparse type: an existing folder, ``what`` it should be (for the message)."""

    def parse(text: str) -> Path:
        path = Path(text)
        if not path.exists():
            raise argparse.ArgumentTypeError(f"{text!r} does not exist; name {what}")
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a file; name {what}")
        return path

    parse.__name__ = "folder"
    return parse


def output_file(text: str) -> Path:
    """An argparse type: a file to write (its folder must exist; not itself a folder)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; name the file to write "
                                         "(e.g. FOLDER/curves.png)")
    if not path.absolute().parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder of {text!r} does not exist; create it "
                                         "first")
    return path
