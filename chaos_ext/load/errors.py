"""The load domain's error (its place in the tree: :mod:`chaos_ext.errors`)."""

from __future__ import annotations

from chaos_ext.errors import ChaosExtError

__all__ = ["LoadError"]


class LoadError(ChaosExtError):
    """The HTTP load driver failed."""
