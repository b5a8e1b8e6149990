"""The edge audit as a library: what ``gameday audit envoy`` calls.

The public face of the envoy package's pipeline for the CLI (the probe
``edge_config_audit`` in :mod:`.probes` is the same audit for experiments):
:func:`run_audit` reads a source, picks a role and a profile, and evaluates
the rules; :func:`summary_line` says the verdict in one line;
:func:`write_fix` writes the suggested fix files (``FIX_KINDS``), merged with
what :func:`load_facts` read about the gateway (``--existing`` manifests, the
live Deployment, ``--memory-limit``); :func:`heap_rule` is the audit rule that
needs the memory limit.
"""

from __future__ import annotations

from chaos_ext.envoy._fix_heap import heap_rule
from chaos_ext.envoy._fix_write import FIX_KINDS, write_fix
from chaos_ext.envoy._gateway import GatewayFacts
from chaos_ext.envoy._gateway_api import load_facts
from chaos_ext.envoy._pipeline import ROLE_CHOICES, AuditRun, run_audit, summary_line
from chaos_ext.envoy._profiles import DEFAULT_PROFILE, PROFILES

__all__ = [
    "DEFAULT_PROFILE",
    "FIX_KINDS",
    "PROFILES",
    "ROLE_CHOICES",
    "AuditRun",
    "GatewayFacts",
    "heap_rule",
    "load_facts",
    "run_audit",
    "summary_line",
    "write_fix",
]
