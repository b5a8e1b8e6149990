"""The texts a run shows, with their ``${var}`` substituted (pure).

chaoslib substitutes ``${var}`` in what it runs (arguments, pauses, the
title of the experiment it holds) but a journal keeps the experiment as
written: its title, description, hypothesis title and activity names still say
``${dns_rate_pps}``. The runner records the values those texts name, as loaded
for the run (``--var``, ``--var-file``, environment, defaults), under
``gameday.text_vars`` (:func:`text_vars`); every output substitutes them
(:func:`substitute`), and a journal without that record (older gameday, plain
``chaos run``) falls back on the values its experiment declares
(:func:`journal_vars`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["journal_vars", "shown_texts", "substitute", "text_vars"]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
_SCALARS = (str, int, float, bool)


def _activities(experiment: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    for block in (hypothesis.get("probes"), experiment.get("method"), experiment.get("rollbacks")):
        for activity in block or []:
            if isinstance(activity, Mapping):
                yield activity


def shown_texts(experiment: Mapping[str, Any]) -> Iterator[str]:
    """Every text of ``experiment`` that an output shows or reads: title, description,
    hypothesis title, activity names, and what a tolerance picks (``target``, ``path``)."""
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    for text in (experiment.get("title"), experiment.get("description"), hypothesis.get("title")):
        if isinstance(text, str):
            yield text
    for activity in _activities(experiment):
        if isinstance(activity.get("name"), str):
            yield activity["name"]
        tolerance = activity.get("tolerance")
        if isinstance(tolerance, Mapping):
            yield from (str(tolerance[k]) for k in ("target", "path") if k in tolerance)


def text_vars(experiment: Mapping[str, Any], configuration: Mapping[str, Any]) -> dict[str, Any]:
    """The loaded configuration values the experiment's shown texts name (for the journal)."""
    names = {m.group(1) for text in shown_texts(experiment) for m in _VAR.finditer(text)}
    return {
        name: configuration[name]
        for name in sorted(names)
        if isinstance(configuration.get(name), _SCALARS)
    }


def _declared(value: Any) -> Any:
    """A configuration entry's value as declared: a literal, or an env entry's default."""
    if isinstance(value, Mapping):
        return value.get("default") if value.get("type") == "env" else None
    return value if isinstance(value, _SCALARS) else None


def journal_vars(journal: Mapping[str, Any]) -> dict[str, Any]:
    """The values to substitute in a journal's texts: what the run recorded
    (``gameday.text_vars``), else what the experiment declares."""
    experiment = journal.get("experiment") or {}
    declared = experiment.get("configuration") or {}
    found = {
        str(k): v
        for k, v in (declared.items() if isinstance(declared, Mapping) else ())
        if _declared(v) is not None
    }
    found = {k: _declared(v) for k, v in found.items()}
    recorded = (journal.get("gameday") or {}).get("text_vars")
    if isinstance(recorded, Mapping):
        found.update({str(k): v for k, v in recorded.items() if isinstance(v, _SCALARS)})
    return found


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def substitute(text: str, values: Mapping[str, Any]) -> str:
    """``text`` with each ``${name}`` that ``values`` knows replaced (others left as they are)."""
    if "${" not in text:
        return text
    return _VAR.sub(
        lambda m: _shown(values[m.group(1)]) if m.group(1) in values else m.group(0), text
    )
