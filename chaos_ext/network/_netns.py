"""Moved to :mod:`chaos_ext._targets.netns` (shared with the DNS rate limit); kept as an alias."""

from __future__ import annotations

from chaos_ext._targets.netns import run_in_netns, socket_in

__all__ = ["run_in_netns", "socket_in"]
