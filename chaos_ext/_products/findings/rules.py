"""Finding rules as data: what evidence names a cause, its fix, and the experiment that proves it.

The rules ship beside the probe catalog (``chaos_ext/prometheus/catalog/findings/*.yaml``,
``probes/findings/`` in the checkout); teams add their own files or folders with
``$GAMEDAY_FINDINGS`` (paths joined by ``os.pathsep``, read after the built-in ones; a rule
of the same name replaces the built-in one). One file::

    findings:
      <rule-name>:
        title: one line
        evidence:                 # every part given must hold
          faults: [<ledger kind>, ...]   # one of these faults was on during the run
          errors_first: [<class>, ...]   # the load's first error class (chaos_ext.load.onset)
          metrics:                       # method probes of the run, each must hold
            - {probe: "<glob of the probe's name>", above: 0}
            - {probe: "...", key: "<field of a dict output>", below: 5}
        cause: what the evidence shows happened
        fix: {setting: what to change, change: which way and to what}
        proof: {experiment: ..., var_file: ..., sandbox: ..., envelope: ...}
        measure_next: what to measure when the fault was on but the rest did not hold

Pure: parsing takes a document; only :func:`load_rules` reads files.
"""

from __future__ import annotations

import fnmatch
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from chaos_ext.errors import FindingRulesError
from chaos_ext.prometheus.catalogs import BUILTIN_FINDINGS_DIR

__all__ = [
    "FINDINGS_ENV",
    "Evidence",
    "Fix",
    "MetricCondition",
    "Proof",
    "Rule",
    "load_rules",
    "parse_rules",
    "rule_files",
]

FINDINGS_ENV = "GAMEDAY_FINDINGS"
_RULE_KEYS = {"title", "evidence", "cause", "fix", "proof", "measure_next"}
_EVIDENCE_KEYS = {"faults", "errors_first", "metrics"}
_METRIC_KEYS = {"probe", "key", "above", "below"}
_PROOF_KEYS = ("experiment", "var_file", "sandbox", "envelope")


@dataclass(frozen=True)
class MetricCondition:
    """A method probe whose value must be above and/or below a threshold."""

    probe: str  # a glob over the probe's name (fnmatch)
    key: str = ""  # the field of a dict output ("" : the number itself, a series' peak)
    above: float | None = None
    below: float | None = None

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.probe)

    def holds(self, value: float) -> bool:
        return (self.above is None or value > self.above) and (
            self.below is None or value < self.below
        )

    def describe(self) -> str:
        what = f"{self.probe}.{self.key}" if self.key else self.probe
        limits = [f"> {self.above:g}"] if self.above is not None else []
        limits += [f"< {self.below:g}"] if self.below is not None else []
        return f"{what} {' and '.join(limits)}"


@dataclass(frozen=True)
class Evidence:
    """What must be true of the run for the rule's cause to be the one the evidence supports."""

    faults: tuple[str, ...] = ()
    errors_first: tuple[str, ...] = ()
    metrics: tuple[MetricCondition, ...] = ()


@dataclass(frozen=True)
class Fix:
    """The one recommended change: the setting, and which way to move it."""

    setting: str
    change: str


@dataclass(frozen=True)
class Proof:
    """The experiment that proves the fix: the same one with the fix in (a var-file, the
    sandbox's tuned app), or the envelope that measures the new breaking point."""

    experiment: str = ""
    var_file: str = ""
    sandbox: str = ""
    envelope: str = ""

    def lines(self) -> list[str]:
        words = {
            "experiment": "re-run",
            "var_file": "with the var-file",
            "sandbox": "in the sandbox",
            "envelope": "the new breaking point",
        }
        return [f"{words[k]}: {getattr(self, k)}" for k in _PROOF_KEYS if getattr(self, k)]


@dataclass(frozen=True)
class Rule:
    """One finding rule: its evidence, its cause, its fix, its proof."""

    name: str
    title: str
    evidence: Evidence
    cause: str
    fix: Fix
    proof: Proof
    measure_next: str
    source: str


def _text(spec: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = spec.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise FindingRulesError(f"{where}: {key} must be a non-empty text, got {value!r}")
    return " ".join(value.split())


def _names(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise FindingRulesError(f"{where}: expected a name or a list of names, got {value!r}")
    return tuple(items)


def _limit(spec: Mapping[str, Any], key: str, where: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FindingRulesError(f"{where}: {key} must be a finite number, got {value!r}")
    return float(value)


def _unknown(spec: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    extra = sorted(set(spec) - set(known))
    if extra:
        raise FindingRulesError(f"{where}: unknown keys {extra}; known: {sorted(known)}")


def _metric(spec: Any, where: str) -> MetricCondition:
    if not isinstance(spec, Mapping):
        raise FindingRulesError(f"{where}: a metric condition is a mapping, got {spec!r}")
    _unknown(spec, _METRIC_KEYS, where)
    condition = MetricCondition(
        probe=_text(spec, "probe", where),
        key=_text(spec, "key", where, required=False),
        above=_limit(spec, "above", where),
        below=_limit(spec, "below", where),
    )
    if condition.above is None and condition.below is None:
        raise FindingRulesError(f"{where}: give above or below (a threshold the value crosses)")
    return condition


def _evidence(spec: Any, where: str) -> Evidence:
    if not isinstance(spec, Mapping):
        raise FindingRulesError(f"{where}: evidence is a mapping, got {spec!r}")
    _unknown(spec, _EVIDENCE_KEYS, where)
    metrics = spec.get("metrics") or []
    if not isinstance(metrics, list):
        raise FindingRulesError(f"{where}.metrics: a list, got {metrics!r}")
    evidence = Evidence(
        faults=_names(spec.get("faults"), f"{where}.faults"),
        errors_first=_names(spec.get("errors_first"), f"{where}.errors_first"),
        metrics=tuple(_metric(m, f"{where}.metrics[{i}]") for i, m in enumerate(metrics)),
    )
    if not evidence.faults:
        raise FindingRulesError(f"{where}.faults: name the fault kinds the cause needs on")
    if not (evidence.errors_first or evidence.metrics):
        raise FindingRulesError(
            f"{where}: a fault alone is no evidence; add errors_first or metrics"
        )
    return evidence


def _rule(name: str, spec: Any, source: str) -> Rule:
    where = f"{source}: {name}"
    if not isinstance(spec, Mapping):
        raise FindingRulesError(f"{where}: a rule is a mapping, got {spec!r}")
    _unknown(spec, _RULE_KEYS, where)
    evidence = _evidence(spec.get("evidence"), f"{where}.evidence")
    fix, proof = spec.get("fix"), spec.get("proof")
    if not isinstance(fix, Mapping) or not isinstance(proof, Mapping):
        raise FindingRulesError(f"{where}: fix and proof are mappings")
    _unknown(fix, ("setting", "change"), f"{where}.fix")
    _unknown(proof, _PROOF_KEYS, f"{where}.proof")
    found = Proof(**{k: _text(proof, k, f"{where}.proof", required=False) for k in _PROOF_KEYS})
    if not (found.experiment or found.envelope):
        raise FindingRulesError(f"{where}.proof: name an experiment or an envelope")
    return Rule(
        name=name,
        title=_text(spec, "title", where),
        evidence=evidence,
        cause=_text(spec, "cause", where),
        fix=Fix(_text(fix, "setting", f"{where}.fix"), _text(fix, "change", f"{where}.fix")),
        proof=found,
        measure_next=_text(spec, "measure_next", where),
        source=source,
    )


def parse_rules(document: Any, source: str) -> list[Rule]:
    """The rules of one parsed YAML document (``{"findings": {name: rule}}``)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("findings"), Mapping):
        raise FindingRulesError(f"{source}: expected a mapping with a 'findings' mapping")
    return [_rule(str(name), spec, source) for name, spec in document["findings"].items()]


def rule_files(extra: str | None = None) -> list[Path]:
    """The built-in rule files, then those of ``extra`` (default ``$GAMEDAY_FINDINGS``)."""
    files = sorted(BUILTIN_FINDINGS_DIR.glob("*.yaml"))
    raw = os.environ.get(FINDINGS_ENV, "") if extra is None else extra
    for part in (p.strip() for p in raw.split(os.pathsep)):
        if not part:
            continue
        path = Path(part)
        if path.is_dir():
            files += sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        elif path.is_file():
            files.append(path)
        else:
            raise FindingRulesError(f"{FINDINGS_ENV}: {part!r} is no file or folder")
    return files


def load_rules(files: Iterable[Path] | None = None) -> list[Rule]:
    """Every rule of ``files`` (default :func:`rule_files`); a later rule replaces one of the
    same name."""
    rules: dict[str, Rule] = {}
    for path in rule_files() if files is None else files:
        try:
            document = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise FindingRulesError(f"{path}: cannot read the rules: {exc}") from exc
        for rule in parse_rules(document, str(path)):
            rules[rule.name] = rule
    return list(rules.values())
