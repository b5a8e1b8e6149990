"""The crash matrix: every fault kind, killed (or failed) in every window, leaves nothing behind.

For each fault kind and each window of its action (before the ledger entry,
after it, mid-apply, after apply, mid-undo), a real ``gameday run`` is
SIGKILLed at that point by a failpoint (``GAMEDAY_FAILPOINTS``, see
:mod:`chaos_ext._core.failpoint`); its exit by SIGKILL proves the window was
reached. After the kill, in the windows where the fault is applied
(``Kind.live_after``), the target's own interface must show it (a state
reader that cannot see the fault fails here), and a timed fault lasts
``HOLD_S``, at least twice as long as the whole cell, so it cannot end by
itself before the final check. Then ``gameday rollback`` runs, and what is still injected is read
through the target's own interface (``ss``, ``pg_stat_activity``, dnsmasq's
query log, the HTTP server's counters, the Kubernetes API) and must equal
what it was before. The ledger must then pass ``gameday ledger --verify``.
The ``raise`` cells fail the action in a window instead: the run must exit 2
and the fault be gone without any ``gameday rollback``.

netem needs a kernel with sch_netem: its row runs in the VM lane
(``test_crash_netem_vm.py``).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.crashkit import (
    PASSWORD,
    configmap_state,
    dns_errors_state,
    dns_flood_state,
    dns_hold_state,
    nft_state,
    node_state,
    pg_state,
    web_state,
)
from support.harness import cli_env, gameday_argv

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.ledger import FAULT_KINDS, Ledger
from chaos_ext._products.sandbox.servers import postgres

# Every timed fault lasts this long by itself, so it cannot end before a cell's final check:
# the slowest cell took 10 s (load 3, 2 cores); a cell must end within half of HOLD_S (2x)
HOLD_S = 120
WINDOWS = ("before-entry", "after-entry", "mid-apply", "after-apply", "mid-undo")
ALL_LIVE = ("mid-apply", "after-apply", "mid-undo")  # a partial apply or undo is still visible


@dataclass(frozen=True)
class Kind:
    """One fault kind in the matrix."""

    name: str
    fixture: str  # the target's fixture
    action: Callable[[Any], dict[str, Any]]  # the provider of the injecting action
    rollback: Callable[[Any], dict[str, Any]] | None  # the provider of its rollback
    state: Callable[[Any], dict[str, Any]]
    env: Callable[[Any], dict[str, str]] = lambda target: {}
    # how long the fault lasts by itself if nobody undoes it (None: until undone); a timed
    # fault must outlast a cell's final check, or a no-op undo would pass (issue 34)
    lasts_s: float | None = None
    # the windows after whose kill the fault is live, as the target itself shows it (seen in
    # every run; a helper's mid-undo comes after its SIGTERM, its mid-apply before it is ready)
    live_after: tuple[str, ...] = ("after-apply",)

    def failpoint(self, window: str) -> str:
        """The failpoint of ``window``: mid-apply and mid-undo are the ones its FaultKind
        declares (``FaultKind.failpoints``), the others the ledger's own."""
        declared = FAULT_KINDS.get(self.name) or next(
            (k for k in FAULT_KINDS.load_all() if k.name == self.name), None
        )  # a session that selected only this cell has imported no kinds module yet
        assert declared is not None, f"{self.name}: no FaultKind declares it"
        mid_apply, mid_undo = declared.failpoints
        special = {"mid-apply": mid_apply, "mid-undo": mid_undo}
        return special.get(window, f"{self.name}.{window}")

    def catches_a_broken_undo(self, window: str, how: str) -> bool:
        """Whether a no-op undo leaves the fault behind in this cell (the mutation check runs
        these cells: they are marked ``undoes(kind)``)."""
        return window == "mid-apply" if how == "raise" else window in self.live_after


def _python(module: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "python", "module": f"chaos_ext.{module}", "func": func, "arguments": arguments}


def _pg_action(server: postgres.PostgresServer) -> dict[str, Any]:
    return {
        **_python(
            "db.actions",
            "exhaust_connections",
            engine="postgresql",
            host=server.host,
            port=server.port,
            database=server.database,
            target=10,
            hold_seconds=HOLD_S,
        ),
        "secrets": ["db"],
    }


KINDS = {
    k.name: k
    for k in (
        Kind(
            "dnsmasq-tcp-hold",
            "dns_server",
            lambda s: _python(
                "dns.actions",
                "saturate_dnsmasq_tcp",
                server=s.address,
                port=s.port,
                connections=5,
                hold_seconds=HOLD_S,
            ),
            lambda s: _python("dns.actions", "release_dnsmasq_tcp"),
            dns_hold_state,
            lasts_s=HOLD_S,
        ),
        Kind(
            "dns-flood",
            "dns_server",
            lambda s: _python(
                "dns.actions",
                "flood_dns",
                server=s.address,
                port=s.port,
                names=["www.example.test"],
                qps=50,
                duration_seconds=HOLD_S,
                workers=2,
            ),
            None,
            dns_flood_state,
            lasts_s=HOLD_S,
            live_after=("mid-apply",),  # the action returns once the flood is over
        ),
        Kind(
            "dns-rate-limit",
            "resolvers",
            lambda p: _python("dns.actions", "limit_dns_rate", pps=100, target=p.target),
            lambda p: _python("dns.actions", "remove_dns_rate_limit", target=p.target),
            nft_state,
            live_after=ALL_LIVE,
        ),
        Kind(
            "dns-errors",
            "resolvers",
            lambda p: _python(
                "dns.actions",
                "inject_dns_errors",
                patterns=["www.*"],
                error="nxdomain",
                target=p.target,
                resolvers=["10.77.0.2"],
                duration_seconds=HOLD_S,
            ),
            lambda p: _python("dns.actions", "remove_dns_errors", target=p.target),
            dns_errors_state,
            lasts_s=HOLD_S,
            live_after=ALL_LIVE,
        ),
        Kind(
            "db-connections",
            "pg_server",
            _pg_action,
            lambda s: _python("db.actions", "release_connections"),
            pg_state,
            lasts_s=HOLD_S,
            env=lambda s: {"GD_CRASH_DB_USER": s.user, "GD_CRASH_DB_PASSWORD": PASSWORD},
        ),
        Kind(
            "http-load",
            "web",
            lambda s: _python(
                "load.actions",
                "drive_http_load",
                urls=[s.url],
                rate=20,
                duration_seconds=HOLD_S,
                processes=1,
            ),
            lambda s: _python("load.actions", "stop_http_load"),
            web_state,
            lasts_s=HOLD_S,
        ),
        Kind(
            "node-drain",
            "cluster",
            lambda c: _python(
                "node.actions",
                "drain_nodes",
                label_selector="role=eat-workers",
                count=2,
                pick="first",
                max_fraction=0.5,
            ),
            lambda c: _python("node.actions", "uncordon_drained_nodes"),
            node_state,
            live_after=ALL_LIVE,
            env=lambda c: {"KUBECONFIG": str(c.kubeconfig)},
        ),
        Kind(
            "sidecar-template",
            "cluster",
            lambda c: _python(
                "sidecar.actions",
                "change_sidecar_template",
                values_patch={"global": {"tag": "1.23.0"}},
            ),
            lambda c: _python("faults.actions", "rollback_faults"),
            configmap_state,
            live_after=ALL_LIVE,
            env=lambda c: {"KUBECONFIG": str(c.kubeconfig)},
        ),
    )
}


def _experiment(kind: Kind, target: Any, window: str) -> dict[str, Any]:
    provider = kind.action(target)
    if kind.name == "dns-flood" and window not in kind.live_after:
        # the flood's action returns when the flood ends: a window after it would wait HOLD_S
        provider["arguments"]["duration_seconds"] = 3
    experiment: dict[str, Any] = {
        "title": f"{kind.name}, crashed on purpose",
        "description": "the crash matrix (issue 22)",
        "method": [{"type": "action", "name": "inject", "provider": provider}],
    }
    if kind.name == "db-connections":
        experiment["secrets"] = {
            "db": {
                "user": {"type": "env", "key": "GD_CRASH_DB_USER"},
                "password": {"type": "env", "key": "GD_CRASH_DB_PASSWORD"},
            }
        }
    if kind.rollback:
        undo = kind.rollback(target)
        experiment["rollbacks"] = [{"type": "action", "name": "undo", "provider": undo}]
    return experiment


def _settled(kind: Kind, target: Any, baseline: dict[str, Any]) -> dict[str, Any]:
    """The target's state once it equals ``baseline`` (helpers take a moment to exit), or last."""
    deadline = time.monotonic() + 15
    state = kind.state(target)
    while state != baseline and time.monotonic() < deadline:
        time.sleep(0.2)
        state = kind.state(target)
    return state


def _cell(kind: str, window: str, how: str) -> Any:
    live = KINDS[kind].catches_a_broken_undo(window, how)
    return pytest.param(kind, window, how, marks=[pytest.mark.undoes(kind)] if live else [])


CELLS = [_cell(k, w, "kill") for k in KINDS for w in WINDOWS]
CELLS += [_cell(k, w, "raise") for k in KINDS for w in ("after-entry", "mid-apply")]
IN_THE_VM = {"netem": "its cells need a kernel with netem: tests/crash/test_crash_netem_vm.py"}


def test_every_fault_kind_has_a_row() -> None:
    """A fault kind declared tomorrow fails here until the matrix crashes it in every window."""
    faults = {k.name for k in FAULT_KINDS.load_all() if k.role == "fault"}
    assert faults - set(IN_THE_VM) == set(KINDS)
    for kind in KINDS:
        assert len(FAULT_KINDS.get(kind).failpoints) == 2, kind  # type: ignore[union-attr]


@pytest.mark.parametrize(("kind_name", "window", "how"), CELLS)
def test_a_crash_in_any_window_leaves_nothing_after_rollback(
    kind_name: str,
    window: str,
    how: str,
    request: pytest.FixtureRequest,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
) -> None:
    kind = KINDS[kind_name]
    target = request.getfixturevalue(kind.fixture)
    baseline = _settled(kind, target, kind.state(target))
    env = {
        **cli_env(ledger_path),
        **kind.env(target),
        "GAMEDAY_FAILPOINTS": f"{kind.failpoint(window)}={how}",
    }
    path = write_experiment(_experiment(kind, target, window))
    started = time.monotonic()
    run = subprocess.run(
        gameday_argv("run", "--journal", "j.json", str(path)),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    ran_s = time.monotonic() - started
    expected = -9 if how == "kill" else 2  # killed there, or the action failed there
    assert run.returncode == expected, f"failpoint not reached? {run.stderr[-3000:]}"
    # the fault was live, as the target shows it: so a no-op undo cannot pass (checked after
    # the rollback, which must run whatever this shows)
    live = kind.state(target) if how == "kill" and window in kind.live_after else None

    env.pop("GAMEDAY_FAILPOINTS")
    if how == "raise":  # the failed action undid its fault at once: no rollback needed
        assert Ledger(ledger_path).open_entries() == []
    else:
        rollback = subprocess.run(
            gameday_argv("rollback"),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert rollback.returncode == 0, rollback.stderr
    rolled_s = time.monotonic() - started
    assert _settled(kind, target, baseline) == baseline, run.stderr[-3000:]
    assert live != baseline, f"{kind_name} not live after a kill at {window}: {live}"
    verdict = fault_ledger.verify(ledger_path, full=True)  # the ledger agrees with itself
    assert verdict.ok, verdict.problems
    assert Ledger(ledger_path).open_entries() == []
    took = time.monotonic() - started
    if kind.lasts_s is not None and window in kind.live_after:  # it outlived the final check
        assert took * 2 <= kind.lasts_s, f"{kind_name} took {took:.1f} s of {kind.lasts_s} s"
    cost = f"run {ran_s:.1f} s, rollback at {rolled_s:.1f} s, total {took:.1f} s"
    print(f"{kind_name} {window} {how}: {cost}")  # noqa: T201 - the matrix's cost, cell by cell
