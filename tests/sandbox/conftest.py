"""Shared sandboxes: one fragile and one tuned (netns backend) for all the modules here.

Each ``sandbox up`` costs 40-100 s, so the modules share them: ``sandbox``
(the fragile app) and ``tuned_sandbox`` are brought up when a test first
needs them and taken down right after the last test of the session that
needs them (not at the end of the session: the rest of the suite must not
run beside them). A module that needs another sandbox (the vm backend, a
broken one) brings up its own.

A test must leave a shared sandbox as it found it. After every module, each
shared sandbox that is up is checked, and before it goes down again: no open
fault in its ledger, `sandbox status` healthy (every service running and
answering), and the qdiscs, classes, filters and nftables rulesets of every
namespace byte-identical to those right after `up`. A module that leaves
one dirty fails there, as an error of its last test, and the dirty sandbox
is taken down (the next module that needs one gets a fresh one). Run alone,
a module brings up what it needs and takes it down. The background traffic
of a sandbox stops after 1 h: the whole folder takes about 20 minutes.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.sandbox import sandbox_cli, targets

from chaos_ext._core.ledger import Ledger

MODES = ("fragile", "tuned")
FIXTURE_OF = {"fragile": "sandbox", "tuned": "tuned_sandbox"}
SHARED = pytest.StashKey["SharedSandboxes"]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sandbox_app(mode): the test uses the shared sandbox of that app mode"
    )


@dataclass
class Shared:
    """One shared sandbox: its prefix, state folder and targets right after `up`."""

    mode: str
    prefix: str
    state: Path
    baseline: dict[str, str] = field(repr=False)

    def problems(self) -> list[str]:
        """What makes it not as `up` left it (empty: clean)."""
        found = []
        ledger = self.state / "ledger.sqlite3"
        if ledger.exists() and (open_faults := Ledger(ledger).open_entries()):
            found.append(f"open faults in its ledger: {[e.id for e in open_faults]}")
        status = sandbox_cli(self.prefix, self.state, "status", "--json", timeout=60)
        report = json.loads(status.stdout) if status.returncode == 0 else {"services": {}}
        sick = {
            name: svc
            for name, svc in report["services"].items()
            if not svc["running"] or svc["answering"] is False
        }
        if status.returncode != 0 or sick:
            found.append(f"status not healthy (exit {status.returncode}): {sick}")
        now = targets(self.prefix)
        changed = sorted(k for k in {*now, *self.baseline} if now.get(k) != self.baseline.get(k))
        if changed:
            found.append(f"qdiscs/nftables changed since up: {changed}")
        return found


class SharedSandboxes:
    """The shared sandboxes of this session, up on demand."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self._tmp = tmp
        self._up: dict[str, Shared] = {}

    def get(self, mode: str) -> Shared:
        if mode not in self._up:
            prefix, state = "s" + uuid.uuid4().hex[:5], self._tmp.mktemp(f"sandbox-{mode}")
            up = sandbox_cli(prefix, state, "up", "--backend", "netns", "--app", mode)
            if up.returncode != 0:
                sandbox_cli(prefix, state, "down")
                raise AssertionError(f"sandbox up --app {mode}: {up.stderr[-3000:]}")
            self._up[mode] = Shared(mode, prefix, state, targets(prefix))
        return self._up[mode]

    def check(self, where: str) -> None:
        """Every shared sandbox that is up is clean, or fail naming ``where``. A problem
        must persist over 5 s: a service too busy to answer one probe is not dirt."""
        if not any(shared.problems() for shared in self._up.values()):
            return
        time.sleep(5)
        dirty = {mode: p for mode, s in self._up.items() if (p := s.problems())}
        for mode in dirty:  # the next module gets a fresh one: only this module fails
            self.down(mode)
        assert not dirty, f"{where} left a shared sandbox dirty: {dirty}"

    def down(self, mode: str) -> None:
        shared = self._up.pop(mode, None)
        if shared is None:
            return
        down = sandbox_cli(shared.prefix, shared.state, "down")
        assert down.returncode == 0, down.stderr


def _needs(item: pytest.Item, mode: str) -> bool:
    if FIXTURE_OF[mode] in getattr(item, "fixturenames", ()):
        return True
    return any(mark.args == (mode,) for mark in item.iter_markers("sandbox_app"))


@pytest.fixture(scope="session")
def shared_sandboxes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedSandboxes]:
    shared = SharedSandboxes(tmp_path_factory)
    try:
        yield shared
    finally:
        for mode in MODES:
            shared.down(mode)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the item's own teardown: take down each shared sandbox no later test needs."""
    try:
        return (yield)
    finally:
        shared = item.session.stash.get(SHARED, None)
        later = item.session.items[item.session.items.index(item) + 1 :]
        for mode in MODES if shared is not None else ():
            if not any(_needs(other, mode) for other in later):
                shared.down(mode)


@pytest.fixture(autouse=True, scope="module")
def _leaves_shared_sandboxes_clean(
    request: pytest.FixtureRequest, shared_sandboxes: SharedSandboxes
) -> Iterator[None]:
    request.session.stash[SHARED] = shared_sandboxes
    yield
    shared_sandboxes.check(request.module.__name__)


@pytest.fixture
def sandbox(shared_sandboxes: SharedSandboxes) -> tuple[str, Path]:
    """The running shared fragile sandbox (netns backend): (prefix, state folder)."""
    shared = shared_sandboxes.get("fragile")
    return shared.prefix, shared.state


@pytest.fixture
def tuned_sandbox(shared_sandboxes: SharedSandboxes) -> tuple[str, Path]:
    """The running shared tuned sandbox (netns backend): (prefix, state folder)."""
    shared = shared_sandboxes.get("tuned")
    return shared.prefix, shared.state
