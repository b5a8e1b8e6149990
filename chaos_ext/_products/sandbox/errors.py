"""The sandbox's error (its place in the tree: :mod:`chaos_ext.errors`)."""

from __future__ import annotations

from chaos_ext.errors import ChaosExtError

__all__ = ["SandboxError"]


class SandboxError(ChaosExtError):
    """The local sandbox platform could not be built or torn down."""
