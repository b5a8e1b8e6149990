"""Stub-resolver search-list expansion (glibc ``res_search`` semantics).

A name with a trailing dot is absolute: it is asked as is, once. Otherwise,
with ``ndots`` and a search list from ``resolv.conf``:

* fewer dots than ``ndots``: each ``name.<domain>`` first, then the name as is;
* at least ``ndots`` dots: the name as is first, then each ``name.<domain>``.

The resolver moves to the next candidate on NXDOMAIN, on an empty answer
(NODATA) and on SERVFAIL; it stops on an answer, on any other error and on a
timeout. In Kubernetes (``ndots:5``, three or more search domains) a lookup
of ``api.example.com`` is therefore asked four times or more before the real
name: the amplification the ``flood_dns`` action reproduces.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NEXT_ON", "candidates"]

#: Outcomes after which a stub resolver tries the next candidate.
NEXT_ON = frozenset({"nxdomain", "nodata", "servfail"})


def candidates(name: str, search: Sequence[str], ndots: int) -> list[str]:
    """The names a stub resolver asks for ``name``, in order, without trailing dots."""
    if name.endswith("."):
        return [name.rstrip(".")]
    suffixed = [f"{name}.{domain.strip('.')}" for domain in search if domain.strip(".")]
    if name.count(".") >= ndots:
        return [name, *suffixed]
    return [*suffixed, name]
