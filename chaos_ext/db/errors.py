"""The database domain's error (its place in the tree: :mod:`chaos_ext.errors`)."""

from __future__ import annotations

from chaos_ext.errors import ChaosExtError

__all__ = ["DatabaseError"]


class DatabaseError(ChaosExtError):
    """Database fault injection or measurement failed."""
