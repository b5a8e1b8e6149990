"""What our two DNS tables share in nftables' JSON: their names, a match, finding and deleting them.

The rate limit (``gameday_dnsrate_<token>``, :mod:`chaos_ext.dns._ratelimit`)
and the DNS error redirect (``gameday_dnserr_<entry id>``,
:mod:`chaos_ext.dns._dnserr_rules`) are each one ``inet`` table whose name is
a prefix and 8-16 hex characters drawn per fault: the name is the table's
identity. Pure: JSON documents in and out, nothing is run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext.errors import InvalidArgument

__all__ = ["FAMILY", "OurTables", "items", "match"]

FAMILY = "inet"
_TOKEN = re.compile(r"^[0-9a-f]{8,16}$")


def match(left: dict[str, Any], right: Any, op: str = "==") -> dict[str, Any]:
    """One ``match`` expression of a rule."""
    return {"match": {"op": op, "left": left, "right": right}}


def items(listing: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The objects of a ``list`` answer (none for an empty one)."""
    return list((listing or {}).get("nftables", []))


@dataclass(frozen=True)
class OurTables:
    """The tables of one fault kind: ``<prefix><token>`` in the ``inet`` family."""

    prefix: str

    def name(self, token: str) -> str:
        """Our table's name for a fault token (8-16 hex characters)."""
        if not _TOKEN.match(token):
            raise InvalidArgument(f"table token {token!r} is not 8-16 hex characters")
        return f"{self.prefix}{token}"

    def ours(self, name: str) -> bool:
        return name.startswith(self.prefix) and bool(_TOKEN.match(name[len(self.prefix) :]))

    def in_listing(self, listing: Mapping[str, Any] | None) -> list[str]:
        """Our tables in a ``list tables`` answer (other tables are never looked at)."""
        names = [
            item["table"]["name"]
            for item in items(listing)
            if "table" in item and item["table"].get("family") == FAMILY
        ]
        return sorted(name for name in names if self.ours(name))

    @staticmethod
    def delete_document(table: str) -> dict[str, Any]:
        """Delete exactly ``table`` (its chains, rules and objects with it)."""
        return {"nftables": [{"delete": {"table": {"family": FAMILY, "name": table}}}]}
