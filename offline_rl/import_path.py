"""Classes named as ``"package.module:Name"`` strings: imported when code declares them, only
looked up when a config file names them.

``import_object`` is for paths written in code (an algorithm's learner class, a lazily
registered algorithm). ``resolve_class`` is for names read from a config file or a checkpoint:
it never imports a module outside offline-rl's own packages, so a file cannot make this process
run code. The user's module must already be imported (their word, not the file's), and the
class must subclass what the field takes, so a file cannot name ``os:system`` either.

Examples:
    >>> import_object("collections:OrderedDict").__name__
    'OrderedDict'
    >>> import collections
    >>> resolve_class("collections:OrderedDict", dict, "example").__name__
    'OrderedDict'
    >>> resolve_class("never_imported_module:Name", object, "prelearner_class")
    Traceback (most recent call last):
    ...
    offline_rl.errors.ConfigError: prelearner_class names 'never_imported_module:Name', but ...
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

from offline_rl.errors import ConfigError

#: Packages whose modules a name in a file may import: offline-rl's own.
OWN_PACKAGES = ("offline_rl", "connectors")


def import_object(path: str) -> Any:
    """``"package.module:attribute"`` -> the attribute, importing the module. Only for paths
    written in code; names read from files go through ``resolve_class``."""
    module_name, attribute = _split(path, "import path")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def resolve_class(path: str, base: type, where: str) -> type:
    """The subclass of ``base`` that ``path`` names, looked up without importing anything but
    offline-rl's own modules; ``ConfigError`` naming ``where`` otherwise."""
    module_name, attribute = _split(path, where)
    module = imported_module(module_name, f"{where} names {path!r}, but")
    target: Any = module
    for part in attribute.split("."):  # static lookups: a module's __getattr__ may import
        target = inspect.getattr_static(target, part, None)
    if not (isinstance(target, type) and issubclass(target, base)):
        raise ConfigError(f"{where} names {path!r}, which is not a subclass of "
                          f"{base.__module__}.{base.__qualname__}")
    return target


def imported_module(module_name: str, context: str) -> Any:
    """The module ``module_name`` if this process has imported it (or it is offline-rl's own);
    ``ConfigError`` starting with ``context`` otherwise, saying how to import it."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    if module_name.split(".")[0] in OWN_PACKAGES:
        try:
            return importlib.import_module(module_name)
        except ImportError:
            raise ConfigError(f"{context} offline-rl has no module {module_name!r}") from None
    raise ConfigError(
        f"{context} the module {module_name!r} is not imported in this process, and offline-rl "
        f"never imports code that a file names. Import it first (import {module_name}), pass "
        f"the class itself, or on the command line add --import {module_name}")


def import_path(obj: Any) -> str:
    """The ``"package.module:Name"`` string ``import_object`` turns back into ``obj``."""
    return f"{obj.__module__}:{obj.__qualname__}"


def _split(path: str, where: str) -> tuple[str, str]:
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{where}: {path!r} is not an import path of the form "
                          "'package.module:Name'")
    return module_name, attribute
