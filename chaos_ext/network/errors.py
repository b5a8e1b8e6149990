"""The network domain's error (its place in the tree: :mod:`chaos_ext.errors`)."""

from __future__ import annotations

from chaos_ext.errors import ChaosExtError

__all__ = ["NetworkError"]


class NetworkError(ChaosExtError):
    """Network fault injection failed (netlink, tc/netem, the qdisc tree)."""
