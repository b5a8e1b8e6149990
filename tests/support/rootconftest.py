"""The helpers of tests/conftest.py, for test modules under a domain conftest.

A domain folder with its own ``conftest.py`` shadows ``from conftest import
...`` (both are imported as the module ``conftest``, the last one wins), which
breaks tests collected after it. This loads the root one by path;
:func:`reexport` copies its plain helpers into a domain conftest so
``from conftest import wait_for`` keeps working everywhere.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_NAME = "gameday_tests_root_conftest"


def _load() -> ModuleType:
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).parents[1] / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module


_root = _load()
cli_env = _root.cli_env
gameday_argv = _root.gameday_argv
wait_for = _root.wait_for


def reexport(namespace: dict[str, Any]) -> None:
    """Copy the root conftest's public helpers (not its fixtures) into ``namespace``."""
    for name, value in vars(_root).items():
        if name.startswith("_") or name in namespace or inspect.ismodule(value):
            continue
        if hasattr(value, "_pytestfixturefunction") or type(value).__name__.startswith("Fixture"):
            continue
        namespace[name] = value
