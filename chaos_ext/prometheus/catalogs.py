"""The named-probe catalogs and the built-in abort plans, as ``gameday catalog`` lists them.

The public face of :mod:`chaos_ext.prometheus._probe_files` for the CLI and the
stop conditions (:mod:`chaos_ext.controls.stop_conditions` reads catalog probes): the
catalog files of ``chaos_ext/prometheus/catalog/`` (``probes/`` in the checkout), the
extra ones named by ``$GAMEDAY_PROBE_CATALOG``, and the abort plans shipped beside them;
and where the finding rules ship (``catalog/findings/``, read by ``chaos_ext._products.findings``).
"""

from __future__ import annotations

from chaos_ext.prometheus._probe_files import (
    BUILTIN_DIR,
    CATALOG_ENV,
    Catalog,
    CatalogProbe,
    builtin_abort_plans,
    default_catalog,
    parse_entries,
)

__all__ = [
    "BUILTIN_FINDINGS_DIR",
    "CATALOG_ENV",
    "Catalog",
    "CatalogProbe",
    "builtin_abort_plans",
    "default_catalog",
    "parse_entries",
]

BUILTIN_FINDINGS_DIR = BUILTIN_DIR / "findings"
"""The finding rules shipped with the package (``probes/findings/*.yaml`` in the checkout)."""
