"""Find HTTP connection managers in a listener, in every form Envoy has dumped. Pure.

* v3 and v2: a network filter whose ``typed_config`` has the
  ``...http_connection_manager.v3.HttpConnectionManager`` (or ``...v2...``) ``@type``;
* older: ``name: envoy.http_connection_manager`` (or the v3 name) with the
  settings in ``config`` (a ``google.protobuf.Struct``), as in Istio < 1.5 dumps;
* ``udpa.type.v1.TypedStruct`` / ``xds.type.v3.TypedStruct`` whose ``type_url``
  is the HCM: the settings are its ``value``.

Forms whose settings cannot be read give a Section with a ``problem`` (the
audit reports those rules ``unreadable`` with the path, never ``absent``):
``typed_config`` holding only packed bytes (``value``), a v1 ``config`` with
``deprecated_v1``, an HCM delivered by ECDS (``config_discovery``), or an HCM
filter without any configuration.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HCM_NAMES", "HCM_TYPE", "Section", "hcm_section", "hcms_of"]

HCM_TYPE = (
    "type.googleapis.com/envoy.extensions.filters.network."
    "http_connection_manager.v3.HttpConnectionManager"
)
HCM_NAMES = frozenset(
    {"envoy.filters.network.http_connection_manager", "envoy.http_connection_manager"}
)
_HCM_SUFFIX = ".HttpConnectionManager"


@dataclass(frozen=True)
class Section:
    """A JSON object of the input and the path where it sits.

    ``problem`` is set when the object is there but its settings cannot be
    interpreted (then ``value`` is what there is, possibly empty).
    """

    value: Mapping[str, Any]
    path: str
    problem: str = ""


def _typed(net_filter: Mapping[str, Any], typed: Mapping[str, Any], path: str) -> Section | None:
    type_url = str(typed.get("@type", ""))
    where = f"{path}.typed_config"
    if type_url.endswith(_HCM_SUFFIX):
        if "value" in typed and set(typed) <= {"@type", "value"}:
            return Section(
                typed,
                where,
                "packed protobuf bytes ('value'): the dump did not "
                "decode this HttpConnectionManager",
            )
        return Section(typed, where)
    if type_url.endswith("TypedStruct") and str(typed.get("type_url", "")).endswith(_HCM_SUFFIX):
        value = typed.get("value")
        if isinstance(value, dict):
            return Section(value, f"{where}.value")
        return Section({}, where, "TypedStruct without a 'value' object")
    if net_filter.get("name") in HCM_NAMES:
        return Section(
            typed,
            where,
            f"typed_config of type {type_url or '(none)'!r} is not an HttpConnectionManager",
        )
    return None


def hcm_section(net_filter: Any, path: str) -> Section | None:
    """The HCM settings of one network filter, or None if it is not an HCM."""
    if not isinstance(net_filter, dict):
        return None
    typed = net_filter.get("typed_config")
    if isinstance(typed, dict):
        return _typed(net_filter, typed, path)
    if net_filter.get("name") not in HCM_NAMES:
        return None
    return _untyped(net_filter, path)


def _untyped(net_filter: Mapping[str, Any], path: str) -> Section:
    config = net_filter.get("config")
    if isinstance(config, dict):
        if config.get("deprecated_v1"):
            return Section(config, f"{path}.config", "v1 configuration (deprecated_v1) is not read")
        return Section(config, f"{path}.config")
    if "config_discovery" in net_filter:
        return Section(
            {},
            f"{path}.config_discovery",
            "delivered by ECDS (config_discovery): its settings are not in this input",
        )
    return Section({}, path, "an HttpConnectionManager filter without typed_config or config")


def hcms_of(listener: Mapping[str, Any], path: str) -> Iterator[Section]:
    """Every HCM of a listener's filter chains and default filter chain."""
    chains = listener.get("filter_chains") or []
    if isinstance(chains, dict):  # one chain written as an object
        chains = [chains]
    pairs = [(f"{path}.filter_chains[{i}]", chain) for i, chain in enumerate(chains)]
    if isinstance(listener.get("default_filter_chain"), dict):
        pairs.append((f"{path}.default_filter_chain", listener["default_filter_chain"]))
    for chain_path, chain in pairs:
        if not isinstance(chain, dict):
            continue
        for j, net_filter in enumerate(chain.get("filters") or []):
            found = hcm_section(net_filter, f"{chain_path}.filters[{j}]")
            if found is not None:
                yield found
