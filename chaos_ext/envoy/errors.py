"""The Envoy domain's error (its place in the tree: :mod:`chaos_ext.errors`)."""

from __future__ import annotations

from chaos_ext.errors import ChaosExtError

__all__ = ["EnvoyError"]


class EnvoyError(ChaosExtError):
    """Fetching or auditing an Envoy configuration failed."""
