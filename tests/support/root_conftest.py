"""tests/conftest.py's helpers and fixtures, for a domain conftest to re-export.

pytest imports every ``conftest.py`` outside a package as the module
``conftest`` and the last one loaded replaces the others in ``sys.modules``.
Once ``tests/<domain>/conftest.py`` is loaded, ``from conftest import
cli_env`` (in any test module, the root ones too) finds the domain conftest.
A domain conftest therefore re-exports these names::

    from support.root_conftest import *  # noqa: F403

The root file is loaded here under a private module name, unchanged.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_NAME = "_gameday_root_conftest"


def _load() -> object:
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).parents[1] / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module


_root = _load()
__all__ = [name for name in vars(_root) if not name.startswith("_") and name != "annotations"]
globals().update({name: getattr(_root, name) for name in __all__})
