"""Files of other tools given as an experiment: say what the file is and what to do with it.

A Chaos Mesh or LitmusChaos manifest, a Krkn config or scenario file, a Chaos
Toolkit journal, a Prometheus rule file: each would otherwise be refused field
by field (``title: required ... method: required``), which says nothing about
what went wrong. A document that has none of an experiment's own keys is
recognised here, and the refusal is one line naming the format and the next step.

The shapes follow each project's documented examples (docs/validation.md,
"Files of other tools", lists them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["foreign_format", "is_experiment_like"]

_EXPERIMENT_KEYS = ("method", "steady-state-hypothesis", "title")  # a journal has "rollbacks"
_DOCS = "docs/validation.md, 'Files of other tools'"
_WRITE = f"gameday runs Chaos Toolkit experiments (title, description, method): {_DOCS}"

# Krkn scenario files: a top-level key -> the scenario type its docs call it
_KRKN_KEYS = {
    "node_scenarios": "node",
    "time_scenarios": "time skew",
    "network_chaos": "network chaos",
    "application_outage": "application outage",
    "pvc_scenario": "PVC",
    "zone_outage": "zone outage",
    "hog-type": "hog",
    "service_target_port": "service hijacking",
    "cluster_shut_down_scenario": "power outage",
    "managedcluster_scenarios": "managed cluster",
}


def is_experiment_like(document: Any) -> bool:
    """Whether the document has any key of an experiment (then its own problems are listed)."""
    return isinstance(document, Mapping) and any(k in document for k in _EXPERIMENT_KEYS)


def _manifest(document: Mapping[str, Any]) -> tuple[str, str] | None:
    kind, version = document.get("kind"), document.get("apiVersion")
    return (kind, version) if isinstance(kind, str) and isinstance(version, str) else None


def _chaos_mesh(document: Any) -> str | None:
    found = _manifest(document) if isinstance(document, Mapping) else None
    if found is None or not found[1].startswith("chaos-mesh.org/"):
        return None
    return (
        f"a Chaos Mesh {found[0]} ({found[1]}), not a Chaos Toolkit experiment: Chaos Mesh "
        f"runs it (kubectl apply -f FILE); {_WRITE}"
    )


def _litmus(document: Any) -> str | None:
    found = _manifest(document) if isinstance(document, Mapping) else None
    if found is None or not found[1].startswith("litmuschaos.io/"):
        return None
    return (
        f"a LitmusChaos {found[0]} ({found[1]}), not a Chaos Toolkit experiment: Litmus runs "
        f"it (kubectl apply -f FILE, with the Litmus operator installed); {_WRITE}"
    )


def _krkn_config(document: Any) -> str | None:
    if not isinstance(document, Mapping) or not isinstance(document.get("kraken"), Mapping):
        return None
    return (
        "a Krkn config (kraken: chaos_scenarios ...), not a Chaos Toolkit experiment: Krkn "
        f"runs it (python run_kraken.py --config FILE); {_WRITE}"
    )


def _krkn_mapping_type(document: Mapping[str, Any]) -> str | None:
    key = next((k for k in _KRKN_KEYS if k in document), None)
    if key is not None:
        return _KRKN_KEYS[key]
    scenarios = document.get("scenarios")
    if isinstance(scenarios, list) and any(
        isinstance(s, Mapping) and "container_name" in s for s in scenarios
    ):
        return "container"
    return None


def _krkn_list_type(document: list[Any]) -> str | None:
    items = [item for item in document if isinstance(item, Mapping)]
    if not items or len(items) != len(document):
        return None
    if all(isinstance(i.get("id"), str) and isinstance(i.get("config"), Mapping) for i in items):
        return f"{items[0]['id']} plugin"
    if all("delete_count" in i and "namespace" in i for i in items):
        return "service disruption"
    return None


def _krkn_scenario_type(document: Any) -> str | None:
    if isinstance(document, Mapping):
        return _krkn_mapping_type(document)
    return _krkn_list_type(document) if isinstance(document, list) else None


def _krkn_scenario(document: Any) -> str | None:
    kind = _krkn_scenario_type(document)
    if kind is None:
        return None
    return (
        f"a Krkn {kind} scenario file, not a Chaos Toolkit experiment: Krkn runs it (list it "
        f"under kraken.chaos_scenarios in Krkn's config); {_WRITE}"
    )


def _journal(document: Any) -> str | None:
    if not isinstance(document, Mapping) or not isinstance(document.get("experiment"), Mapping):
        return None
    if not ("run" in document or "chaoslib-version" in document or "status" in document):
        return None
    status = document.get("status")
    ended = f", status {status!r}" if isinstance(status, str) else ""
    return (
        f"a Chaos Toolkit journal (the record of a run{ended}), not an experiment: "
        "`gameday report FILE` reports on it; to run its experiment again, take it out "
        "(jq .experiment FILE > experiment.json)"
    )


def _prometheus_rules(document: Any) -> str | None:
    if not isinstance(document, Mapping) or not isinstance(document.get("groups"), list):
        return None
    return (
        "a Prometheus rule file (groups: ...), not an experiment: give it to "
        "`gameday run --abort-on FILE` to stop a run when its alerts fire"
    )


def _kubernetes(document: Any) -> str | None:
    found = _manifest(document) if isinstance(document, Mapping) else None
    if found is None:
        return None
    return (
        f"a Kubernetes {found[0]} manifest ({found[1]}), not a Chaos Toolkit experiment: "
        f"apply it with kubectl; {_WRITE}"
    )


# most specific first: a Chaos Mesh manifest is also a Kubernetes manifest
_RECOGNISERS: tuple[Callable[[Any], str | None], ...] = (
    _journal,
    _chaos_mesh,
    _litmus,
    _krkn_config,
    _krkn_scenario,
    _prometheus_rules,
    _kubernetes,
)


def foreign_format(documents: list[Any]) -> str | None:
    """One line naming what the file is, when it is another tool's file; else None.

    ``documents``: every document of the file. A document with an experiment's own
    keys is never called foreign (its problems are listed as an experiment's).
    """
    if any(is_experiment_like(d) for d in documents):
        return None
    for rank, recognise in enumerate(_RECOGNISERS):
        for index, document in enumerate(documents):
            said = recognise(document)
            if said is None:
                continue
            if len(documents) == 1:
                return said
            last = rank == len(_RECOGNISERS) - 1
            kinds = _kinds(documents) if last else f"document {index + 1} is {said}"
            return f"multi-document YAML ({len(documents)} documents): {kinds}"
    return None


def _kinds(documents: list[Any]) -> str:
    """What a stream of plain Kubernetes manifests holds, in one line."""
    kinds = [
        (found or ("?", ""))[0]
        for found in (_manifest(d) if isinstance(d, Mapping) else None for d in documents)
    ]
    return (
        f"Kubernetes manifests ({', '.join(kinds)}), not a Chaos Toolkit experiment: apply "
        f"them with kubectl; {_WRITE}"
    )
