"""What ``gameday advise`` reports: a :class:`Risk`, and the experiment that tests each kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EXPERIMENTS", "KINDS", "Advice", "Risk", "TestedBy"]


@dataclass(frozen=True)
class TestedBy:
    """The experiment (a path under ``experiments/``) that tests a risk, and its var-file.

    ``var_file`` None: the experiment reads its configuration from the environment
    (defaults in the file); ``experiment`` None: no experiment yet.
    """

    experiment: str | None
    var_file: str | None = None

    def command(self) -> str:
        """The command that runs it (or "no experiment yet")."""
        if self.experiment is None:
            return "no experiment yet"
        var = f" --var-file {self.var_file}" if self.var_file else ""
        return f"gameday run{var} {self.experiment}"


_INCIDENT_VARS = "experiments/incidents/vars/cluster.example.yaml"

KINDS: dict[str, str] = {
    "ndots-5": "pods resolve with ndots:5 (search-list amplification)",
    "dns-no-cache": "kube-dns with dnsmasq and no NodeLocal DNSCache",
    "pool-over-ceiling": "replicas x pool size above the database's connection ceiling",
    "single-replica": "workloads with one replica on the node pool",
    "no-pdb": "workloads without a PodDisruptionBudget on the node pool",
    "sidecar-drift": "sidecars drifted from the injector template",
    "envoy-audit": "the Envoy edge audit fails",
}
"""Each risk kind and its one-line title."""

EXPERIMENTS: dict[str, TestedBy] = {
    "ndots-5": TestedBy("experiments/dns-search-amplification.json"),
    "dns-no-cache": TestedBy("experiments/incidents/02-nodelocal-dns-stall.json", _INCIDENT_VARS),
    "pool-over-ceiling": TestedBy("experiments/incidents/01-eks-load-test.json", _INCIDENT_VARS),
    "single-replica": TestedBy("experiments/node-drain.json"),
    "no-pdb": TestedBy("experiments/node-drain.json"),
    "sidecar-drift": TestedBy("experiments/sidecar-template-change.json"),
    "envoy-audit": TestedBy("experiments/envoy-edge-audit.json"),
}
"""The experiment that tests each risk kind (tests check that every path exists)."""


@dataclass(frozen=True)
class Risk:
    """One risk: its kind, the objects that show it, and the evidence read from them."""

    kind: str
    objects: tuple[str, ...]
    evidence: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return KINDS[self.kind]

    @property
    def tested_by(self) -> TestedBy:
        return EXPERIMENTS[self.kind]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly: what ``--json`` prints for this risk."""
        tested = self.tested_by
        return {
            "kind": self.kind,
            "title": self.title,
            "objects": list(self.objects),
            "evidence": self.evidence,
            "details": self.details,
            "experiment": tested.experiment,
            "var_file": tested.var_file,
            "run": tested.command(),
        }


@dataclass
class Advice:
    """What one ``gameday advise`` found: the risks, what was checked, what could not be read.

    ``notes``: a line per check skipped or source left out on purpose (no DSN, no
    metric); ``problems``: a line per source that was given but could not be read.
    """

    risks: list[Risk] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "risks": [r.as_dict() for r in self.risks],
            "notes": list(self.notes),
            "problems": list(self.problems),
        }

    @classmethod
    def from_dict(cls, document: Any) -> Advice:
        """What :meth:`as_dict` wrote (``gameday advise --json``); ValueError naming what is
        wrong (an unknown risk kind, a missing key)."""
        if not isinstance(document, dict) or not isinstance(document.get("risks"), list):
            raise ValueError("not the output of `gameday advise --json` (no 'risks' list)")
        risks = []
        for item in document["risks"]:
            kind = item.get("kind") if isinstance(item, dict) else None
            if kind not in KINDS:
                raise ValueError(f"unknown risk kind {kind!r} (known: {', '.join(KINDS)})")
            risks.append(
                Risk(
                    kind=str(kind),
                    objects=tuple(str(o) for o in item.get("objects", [])),
                    evidence=str(item.get("evidence", "")),
                    details=dict(item.get("details") or {}),
                )
            )
        notes = [str(n) for n in document.get("notes", [])]
        return cls(risks, notes, [str(p) for p in document.get("problems", [])])
