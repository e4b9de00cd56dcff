"""Classes and functions named in configs as ``"package.module:Name"`` strings.

Example:
    >>> import_object("collections:OrderedDict").__name__
    'OrderedDict'
"""

from __future__ import annotations

import importlib
from typing import Any

from offline_rl.errors import ConfigError


def import_object(path: str) -> Any:
    """``"package.module:attribute"`` -> the attribute."""
    module_name, _, attribute = path.partition(":")
    if not attribute:
        raise ConfigError(f"{path!r} is not an import path of the form 'package.module:Name'")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def import_path(obj: Any) -> str:
    """The ``"package.module:Name"`` string ``import_object`` turns back into ``obj``."""
    return f"{obj.__module__}:{obj.__qualname__}"
