"""Moved to :mod:`chaos_ext._targets.pod` (shared with the DNS rate limit); kept as an alias."""

from __future__ import annotations

from chaos_ext._targets.pod import RULES, PodPlacement, container_pid, resolve_pod

__all__ = ["RULES", "PodPlacement", "container_pid", "resolve_pod"]
