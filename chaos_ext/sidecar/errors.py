"""The sidecar domain's error (its place in the tree: :mod:`chaos_ext.errors`)."""

from __future__ import annotations

from chaos_ext.errors import ChaosExtError

__all__ = ["SidecarError"]


class SidecarError(ChaosExtError):
    """Sidecar template change, drift detection or rollout failed."""
