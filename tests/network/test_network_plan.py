"""plan_add_latency in a namespace the test creates: the tree it would replace, nothing changed.

Reading qdiscs needs no netem: on this host's kernel (no sch_netem/sch_htb) the
plan still shows the tree and reports the missing features as a failed preflight.
"""

from __future__ import annotations

from pathlib import Path

from support.netlab import VethNs, kernel_has_netem, sh

from chaos_ext.network.plan import plan_add_latency


def _dump(ns: str, dev: str) -> str:
    """Every qdisc, class and filter of the namespace, as tc prints them (no counters asked)."""
    return "".join(
        sh("tc", "-n", ns, what, "show", "dev", dev).stdout for what in ("qdisc", "class", "filter")
    )


def test_plan_shows_the_qdisc_it_would_replace_and_changes_nothing(
    veth_ns: VethNs, ledger_path: Path
) -> None:
    ns, dev = veth_ns.ns, veth_ns.dev
    sh(
        "tc",
        "-n",
        ns,
        "qdisc",
        "add",
        "dev",
        dev,
        "root",
        "handle",
        "8001:",
        "tbf",
        "rate",
        "1mbit",
        "burst",
        "32kbit",
        "latency",
        "400ms",
    )
    before, ledger_before = _dump(ns, dev), ledger_path.exists()

    plan = plan_add_latency(
        interface=dev,
        delay_seconds=0.15,
        destinations=["10.20.0.0/16", "192.0.2.7/32"],
        ports=[5432],
        target=f"netns:{ns}",
    )

    assert _dump(ns, dev) == before  # byte-identical
    assert ledger_path.exists() == ledger_before  # not even created
    assert plan["targets"] == [f"netns:{ns}/{dev}"]
    radius = plan["blast_radius"]
    assert radius["interface"] == dev and radius["target"] == f"netns:{ns}"
    assert radius["destinations"] == ["10.20.0.0/16", "192.0.2.7/32"]
    assert radius["ports"] == [5432]
    assert radius["replaces_root"] == "tbf"
    assert any(line.startswith("qdisc tbf 8001:") for line in radius["current_tree"])
    checks = {c["check"]: c for c in plan["preflight"]}
    assert checks["no latency fault there yet"]["ok"]
    assert checks["kernel and CAP_NET_ADMIN"]["ok"] == kernel_has_netem()
    assert "tbf" in plan["would"] and "150 ms" in plan["would"]


def test_plan_on_a_missing_interface_fails_its_preflight(veth_ns: VethNs) -> None:
    plan = plan_add_latency(
        interface="nosuch0",
        delay_seconds=0.1,
        destinations=["10.0.0.0/8"],
        target=f"netns:{veth_ns.ns}",
    )
    assert not all(c["ok"] for c in plan["preflight"])
    assert "nosuch0" in str(plan["preflight"])
