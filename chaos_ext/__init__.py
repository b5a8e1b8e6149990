"""chaos_ext: the gameday Chaos Toolkit extension.

One folder per fault domain (``chaos_ext/<domain>/actions.py`` and
``probes.py``); :func:`discover` lists their activities for ``chaos discover``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "activity_modules", "discover"]


def activity_modules() -> list[tuple[str, str]]:
    """``(module, "action" | "probe")`` for every domain's actions/probes module."""
    import pkgutil  # noqa: PLC0415 - only discovery needs it, not `gameday --help`

    found: list[tuple[str, str]] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.ispkg or info.name.startswith("_"):
            continue
        pkg = importlib.import_module(f"{__name__}.{info.name}")
        names = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
        for module, kind in (("actions", "action"), ("probes", "probe")):
            if module in names:
                found.append((f"{pkg.__name__}.{module}", kind))
    return found


def discover(discover_system: bool = True) -> dict[str, Any]:
    """Describe every chaos_ext activity for ``chaos discover chaos_ext``."""
    from chaoslib.discovery.discover import (  # noqa: PLC0415 - only needed by chaos discover
        discover_actions,
        discover_probes,
        initialize_discovery_result,
    )

    from chaos_ext._core.discovery import activity_types  # noqa: PLC0415

    result: dict[str, Any] = initialize_discovery_result("chaos_ext", __version__, "gameday")
    for module, kind in activity_modules():
        finder = discover_actions if kind == "action" else discover_probes
        for activity in finder(module):
            func = getattr(importlib.import_module(module), activity["name"])
            arguments, returned = activity_types(func)  # chaoslib reads string annotations
            for argument in activity["arguments"]:
                if argument["name"] in arguments:
                    argument["type"] = arguments[argument["name"]]
            if returned is not None:
                activity["return_type"] = returned
            result["activities"].append(activity)
    return result
