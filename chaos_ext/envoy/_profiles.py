"""Profiles: named rule sets shipped as data (``profiles/*.yaml``). Pure.

``envoy-edge`` (default) is what Envoy's edge best-practices page asks for;
``hardened`` extends it with stricter items; ``sidecar`` is for mesh sidecars.
A profile file says which listeners it audits (``edge`` or ``inbound``), which
proxy roles it is for, and its rules. Rules files (``--rules``) and the
``rules`` argument merge onto the chosen profile by rule id.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from chaos_ext.envoy._rules import Rule, rules_from_data
from chaos_ext.errors import InvalidArgument

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "effective_rules", "load_profile"]

PROFILES = ("envoy-edge", "hardened", "sidecar")
DEFAULT_PROFILE = "envoy-edge"
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: 10x faster, as safe


@dataclass(frozen=True)
class Profile:
    """A named rule set and what it applies to."""

    name: str
    title: str
    listeners: str  # edge | inbound
    applies_to: tuple[str, ...]
    rules: tuple[Rule, ...]


def _document(text: str, origin: str) -> Mapping[str, Any]:
    try:
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"{origin}: not valid YAML: {exc}") from None
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise InvalidArgument(f"{origin}: expected a 'rules:' list (see docs/envoy.md)")
    return data


@functools.lru_cache(maxsize=8)
def load_profile(name: str) -> Profile:
    """A shipped profile by name (InvalidArgument listing them for an unknown one)."""
    if name not in PROFILES:
        raise InvalidArgument(f"profile: {name!r} is not one of {', '.join(PROFILES)}")
    text = resources.files(__package__).joinpath(f"profiles/{name}.yaml").read_text("utf-8")
    data = _document(text, f"profiles/{name}.yaml")
    base: Sequence[Rule] = ()
    if data.get("extends"):
        base = load_profile(str(data["extends"])).rules
    return Profile(
        name=name,
        title=str(data.get("title", name)),
        listeners=str(data.get("listeners", "edge")),
        applies_to=tuple(data.get("applies_to") or ()),
        rules=tuple(rules_from_data(data["rules"], base)),
    )


def _rules_file(path: str, base: Sequence[Rule]) -> list[Rule]:
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise InvalidArgument(f"rules file {path!r}: cannot read: {exc.strerror or exc}") from None
    data = _document(text, path)
    start: Sequence[Rule] = base if data.get("defaults", True) is not False else ()
    return rules_from_data(data["rules"], start)


def effective_rules(
    profile: str, rules: Iterable[Mapping[str, Any]] | None, rules_file: str
) -> tuple[Profile, list[Rule]]:
    """The profile, then the file's rules, then the ``rules`` argument's, merged by id."""
    chosen = load_profile(profile or DEFAULT_PROFILE)
    merged = list(chosen.rules)
    if rules_file:
        merged = _rules_file(rules_file, merged)
    if rules:
        merged = rules_from_data(list(rules), merged)
    if not merged:
        raise InvalidArgument("rules: no rule left to check")
    return chosen, merged
