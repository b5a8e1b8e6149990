"""The root qdisc tree of one interface over netlink (pyroute2): snapshot, apply, restore.

A snapshot lists the qdiscs, classes and filters hanging from the root as JSON:
their headers, kind, the kernel's own TCA_OPTIONS bytes (hex, replayed as they
are) and the decoded options (for people and for comparing trees without
counters). Restoring deletes the current root (the kernel re-attaches its
default) and replays the snapshot parents first, then checks that the tree
now matches it; a difference raises NetworkError.

Replay covers what ``tc`` users build: qdiscs of any kind, classes of the
kinds that create them (htb, hfsc, drr, qfq; others' classes are implicit),
filters in chain 0 (u32 hash tables the kernel allocated are re-created by
the kernel). Anything else shows up as a difference after the restore.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink import (
    NLM_F_ACK,
    NLM_F_CREATE,
    NLM_F_EXCL,
    NLM_F_REPLACE,
    NLM_F_REQUEST,
    nla_slot,
    nlmsg,
)
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import (
    RTM_DELQDISC,
    RTM_NEWQDISC,
    RTM_NEWTCLASS,
    RTM_NEWTFILTER,
    TC_H_ROOT,
)

from chaos_ext._core.failpoint import failpoint
from chaos_ext.network import _spec
from chaos_ext.network.errors import NetworkError

__all__ = ["apply_tree", "delete_root", "fingerprint", "is_ours", "replay", "snapshot", "verify"]

TC_H_INGRESS = 0xFFFFFFF1
CLASS_KINDS = frozenset({"htb", "hfsc", "drr", "qfq"})
COUNTERS = frozenset({"direct_pkts", "TCA_U32_PCNT", "TCA_STATS", "TCA_STATS2"})
TCA_HTB_INIT = 2
FILTER_FLAGS = {"u32": 11, "flower": 22, "matchall": 3}
TCA_CLS_FLAGS_STATUS = 0x4 | 0x8


class _raw_tcmsg(nlmsg):  # type: ignore[misc]  # pyroute2 message classes are untyped
    """A tcmsg whose TCA_OPTIONS is sent as the exact bytes from a dump.

    Not a subclass of pyroute2's ``tcmsg``: its compiled attribute table is
    cached on the class and would be shared.
    """

    prefix = "TCA_"
    fields = (
        ("family", "B"),
        ("pad1", "B"),
        ("pad2", "H"),
        ("index", "i"),
        ("handle", "I"),
        ("parent", "I"),
        ("info", "I"),
    )
    nla_map = (("TCA_UNSPEC", "none"), ("TCA_KIND", "asciiz"), ("TCA_OPTIONS", "cdata"))


def _plain(value: Any) -> Any:
    if isinstance(value, nla_slot):
        return [value[0], _plain(value[1])]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "header"}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    return value


def _record(kind_of: str, msg: Any) -> dict[str, Any]:
    options = msg.get_attr("TCA_OPTIONS")
    raw = None
    if options is not None:
        # copy now: the receive buffer is reused by the next netlink call
        raw = bytes(options.data[options.offset + 4 : options.offset + options.length]).hex()
    return {
        "type": kind_of,
        "kind": msg.get_attr("TCA_KIND"),
        "handle": msg["handle"],
        "parent": msg["parent"],
        "info": msg["info"] if kind_of == "filter" else 0,
        "options_hex": raw,
        "options": _plain(options) if options is not None else None,
    }


def snapshot(ipr: IPRoute, index: int) -> dict[str, Any]:
    """The root tree of interface ``index`` as JSON (ingress/clsact are left out)."""
    try:
        qdiscs = [_record("qdisc", m) for m in ipr.get_qdiscs(index=index)]
        qdiscs = [q for q in qdiscs if q["parent"] != TC_H_INGRESS]
        classes = [_record("class", m) for m in ipr.get_classes(index=index)]
        parents = {q["handle"] for q in qdiscs} | {c["handle"] for c in classes}
        filters = [
            _record("filter", m)
            for parent in sorted(parents)
            for m in ipr.get_filters(index=index, parent=parent)
        ]
    except NetlinkError as exc:
        raise NetworkError(f"cannot read the qdisc tree of interface {index}: {exc}") from exc
    root = next((q for q in qdiscs if q["parent"] == TC_H_ROOT), None)
    return {
        "root_kind": root["kind"] if root else None,
        "default_root": root is None or root["handle"] == 0,
        "items": [*qdiscs, *classes, *filters],
    }


def _strip(options: Any) -> Any:
    if isinstance(options, dict):
        return {k: _strip(v) for k, v in options.items() if k not in COUNTERS}
    if isinstance(options, list):
        kept = [o for o in options if not (isinstance(o, list) and o and o[0] in COUNTERS)]
        return [_strip(o) for o in kept]
    return options


def fingerprint(snap: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What must be equal for two trees to be the same (counters removed)."""
    return sorted(
        (i["type"], i["kind"], i["handle"], i["parent"], i["info"], repr(_strip(i["options"])))
        for i in snap["items"]
        if i["handle"] or i["type"] == "qdisc"
    )


def is_ours(snap: dict[str, Any]) -> bool:
    """Whether the root is the latency tree this module installs."""
    return any(
        i["type"] == "qdisc" and i["parent"] == TC_H_ROOT and i["handle"] == _spec.ROOT_HANDLE
        for i in snap["items"]
    )


def _owner_kind(snap: dict[str, Any], handle: int) -> str | None:
    for item in snap["items"]:
        if item["type"] == "qdisc" and item["handle"] == handle & 0xFFFF0000:
            return str(item["kind"])
    return None


def _is_auto_hashtable(item: dict[str, Any]) -> bool:
    handle = int(item["handle"])
    return item["kind"] == "u32" and handle & 0xFFFFF == 0 and handle >> 20 >= 0x800


def _replayable(snap: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(qdiscs+classes, filters) that restore must create; builtins/implicit ones left out."""
    nodes, filters = [], []
    for item in snap["items"]:
        if (item["type"] == "qdisc" and item["handle"]) or (
            item["type"] == "class" and _owner_kind(snap, item["handle"]) in CLASS_KINDS
        ):
            nodes.append(item)
        elif item["type"] == "filter" and item["options_hex"] and not _is_auto_hashtable(item):
            filters.append(item)
    return nodes, filters


def _order(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parents before children: a qdisc needs its parent class, a class its qdisc/class."""
    done: set[int] = set()
    ordered: list[dict[str, Any]] = []
    pending = list(nodes)
    known = {n["handle"] for n in nodes}
    while pending:
        ready = [n for n in pending if _parent_of(n) in done or _parent_of(n) not in known]
        if not ready:
            raise NetworkError("the saved qdisc tree has a cycle; cannot replay it")
        for node in ready:
            ordered.append(node)
            done.add(node["handle"])
            pending.remove(node)
    return ordered


def _parent_of(node: dict[str, Any]) -> int:
    if node["type"] == "class" and node["parent"] == TC_H_ROOT:
        return int(node["handle"]) & 0xFFFF0000
    return int(node["parent"])


def _patch_attrs(raw: bytes, wanted: int, patch: Any) -> bytes:
    """Rewrite the u32 payload of top-level attribute ``wanted`` in ``raw`` with ``patch(v)``."""
    patched = bytearray(raw)
    pos = 0
    while pos + 4 <= len(patched):
        length, kind = struct.unpack_from("HH", patched, pos)
        if kind & 0x3FFF == wanted and length >= 8:
            (value,) = struct.unpack_from("I", patched, pos + 4)
            struct.pack_into("I", patched, pos + 4, patch(value))
        pos += max(4, (length + 3) & ~3)
    return bytes(patched)


def _fix_options(item: dict[str, Any]) -> bytes:
    """Undo the few places where a dump is not what a create accepts."""
    raw = bytes.fromhex(item["options_hex"] or "")
    if item["type"] == "qdisc" and item["kind"] == "htb":
        # htb dumps its version as 0x30011 but accepts only the major (3) on create
        raw = _patch_attrs(raw, TCA_HTB_INIT, lambda v: v >> 16 if v > 0xFFFF else v)
    if item["type"] == "qdisc" and item["kind"] == "sfq" and len(raw) >= 20:
        # sfq dumps its default depth as limit; sent back, it would clamp flows to it
        limit, flows = struct.unpack_from("I", raw, 8)[0], struct.unpack_from("I", raw, 16)[0]
        if flows > limit:
            raw = raw[:8] + struct.pack("I", 0) + raw[12:]
    if item["type"] == "filter" and item["kind"] in FILTER_FLAGS:
        # classifier flags: IN_HW / NOT_IN_HW are status bits, refused on create
        raw = _patch_attrs(raw, FILTER_FLAGS[item["kind"]], lambda v: v & ~TCA_CLS_FLAGS_STATUS)
    return raw


def _send(ipr: IPRoute, index: int, item: dict[str, Any]) -> None:
    msg = _raw_tcmsg()
    msg["index"] = index
    msg["handle"] = item["handle"]
    msg["parent"] = _parent_of(item) if item["type"] == "class" else item["parent"]
    msg["info"] = item["info"]
    msg["attrs"] = [("TCA_KIND", item["kind"])]
    if item["options_hex"] is not None:
        msg["attrs"].append(("TCA_OPTIONS", _fix_options(item)))
    msg_type, flags = {
        "qdisc": (RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE),
        "class": (RTM_NEWTCLASS, NLM_F_CREATE | NLM_F_EXCL),
        "filter": (RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL),
    }[item["type"]]
    try:
        tuple(ipr.nlm_request(msg, msg_type=msg_type, msg_flags=NLM_F_REQUEST | NLM_F_ACK | flags))
    except NetlinkError as exc:
        raise NetworkError(
            f"restoring {item['type']} {item['kind']} {_spec.handle_text(item['handle'])}: {exc}"
        ) from exc


def delete_root(ipr: IPRoute, index: int) -> None:
    """Delete the root qdisc (the kernel re-attaches its default); no root is fine."""
    msg = _raw_tcmsg()
    msg["index"] = index
    msg["parent"] = TC_H_ROOT
    try:
        tuple(ipr.nlm_request(msg, msg_type=RTM_DELQDISC, msg_flags=NLM_F_REQUEST | NLM_F_ACK))
    except NetlinkError as exc:
        if exc.code not in (2, 22):  # ENOENT / EINVAL: no (deletable) root qdisc
            raise NetworkError(f"cannot delete the root qdisc of interface {index}: {exc}") from exc


def replay(ipr: IPRoute, index: int, snap: dict[str, Any]) -> None:
    """Delete the current root and re-create the saved tree, parents first.

    Use a netlink socket that has not dumped anything: pyroute2 can leave the
    error answer of a filter dump on a classless qdisc queued on its socket.
    """
    _request_mode(ipr)
    delete_root(ipr, index)
    failpoint("netem.mid-undo")  # the latency tree gone, the saved one not yet back
    nodes, filters = _replayable(snap)
    for item in _order(nodes):
        _send(ipr, index, item)
    order = sorted(filters, key=lambda f: (f["parent"], f["info"], not _is_table(f), f["handle"]))
    for item in order:
        _send(ipr, index, item)


def verify(snap: dict[str, Any], now: dict[str, Any]) -> None:
    """NetworkError unless ``now`` is the same tree as ``snap`` (counters aside)."""
    if fingerprint(now) != fingerprint(snap):
        raise NetworkError(
            "the restored qdisc tree differs from the snapshot: "
            f"{_diff(fingerprint(snap), fingerprint(now))}"
        )


def _is_table(item: dict[str, Any]) -> bool:
    return item["kind"] == "u32" and int(item["handle"]) & 0xFFFFF == 0


def _diff(want: Iterable[tuple[Any, ...]], got: Iterable[tuple[Any, ...]]) -> str:
    want_set, got_set = set(want), set(got)
    missing = [f"{t[0]} {t[1]} {_spec.handle_text(t[2])}" for t in sorted(want_set - got_set)]
    extra = [f"{t[0]} {t[1]} {_spec.handle_text(t[2])}" for t in sorted(got_set - want_set)]
    return f"missing {missing or 'nothing'}, unexpected {extra or 'nothing'}"


def _request_mode(ipr: IPRoute) -> None:
    # pyroute2 0.9.7's synchronous nlm_request reads a status key it never sets
    ipr.status["nlm_generator"] = False


def apply_tree(ipr: IPRoute, index: int, spec: _spec.LatencySpec) -> None:
    """Install the scoped latency tree (see :mod:`chaos_ext.network._spec`)."""
    rate = {"rate": _spec.NO_SHAPING_RATE, "quantum": _spec.HTB_QUANTUM}
    try:
        ipr.tc(
            "replace",
            "htb",
            index,
            _spec.ROOT_HANDLE,
            parent=TC_H_ROOT,
            default=_spec.DEFAULT_CLASS & 0xFFFF,
        )
        for classid in (_spec.DEFAULT_CLASS, _spec.DELAY_CLASS):
            ipr.tc("add-class", "htb", index, classid, parent=_spec.ROOT_HANDLE, **rate)
        ipr.tc(
            "add",
            "netem",
            index,
            _spec.NETEM_HANDLE,
            parent=_spec.DELAY_CLASS,
            **_spec.netem_kwargs(spec),
        )
        failpoint("netem.mid-apply")  # a tree without its filters: half a fault
        for prio, (protocol, keys) in enumerate(_spec.filter_specs(spec), start=1):
            ipr.tc(
                "add-filter",
                "u32",
                index,
                parent=_spec.ROOT_HANDLE,
                prio=prio,
                protocol=protocol,
                target=_spec.DELAY_CLASS,
                keys=keys,
            )
    except NetlinkError as exc:
        raise NetworkError(f"installing the latency tree on interface {index}: {exc}") from exc
