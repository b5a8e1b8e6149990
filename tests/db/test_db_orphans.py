"""A connection hold's sessions are found by application name without a ledger (issue 27).

``exhaust_connections`` holds real PostgreSQL connections from a helper;
then the ledger's database, event log and marker are deleted. ``gameday
ledger --scan --db-dsn`` must list the sessions (named
``gameday-exhaust-<ledger id>``) and the helper as orphans, and ``gameday
rollback --orphans`` must end the sessions (first, on their own: the
helper is left for a second call) and the helper. Checked through the
server's own ``pg_stat_activity`` on the test's admin connection and
``/proc``, never through the scan.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env, gameday_argv, wait_for

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.helper import stop_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers import postgres
from chaos_ext.db.actions import exhaust_connections

pytestmark = [pytest.mark.timeout(240), pytest.mark.orphans]


def _sessions(admin: Any, name: str) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
    ).fetchone()
    return int(row[0])


@pytest.mark.undoes("db-session-orphan")
@pytest.mark.undoes("helper-orphan")
def test_hold_sessions_are_found_by_name_without_a_ledger_and_ended(
    pg_server: postgres.PostgresServer,
    pg_admin: Any,
    ledger_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    held = exhaust_connections(
        engine="postgresql",
        host=pg_server.host,
        port=pg_server.port,
        database=pg_server.database,
        target=5,
        hold_seconds=180,
        secrets={"user": pg_server.user, "password": pg_server.password},
    )
    entry_id = held["ledger_id"]
    request.addfinalizer(lambda: stop_helpers(entry_id))  # whatever the test did
    name = f"gameday-exhaust-{entry_id}"
    assert _sessions(pg_admin, name) == 5
    [entry] = Ledger(ledger_path).open_entries()
    pid = int(entry.recipe["pid"])
    for part in ledger_path.parent.glob(ledger_path.name + "*"):
        part.unlink()
    shutil.rmtree(os.environ["GAMEDAY_LEDGER_MARKERS"], ignore_errors=True)

    dsn = f"postgresql://{pg_server.user}@{pg_server.host}:{pg_server.port}/{pg_server.database}"
    env = {**cli_env(ledger_path), "PGPASSWORD": pg_server.password}

    def gameday(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            gameday_argv(*args), capture_output=True, text=True, timeout=120, env=env, check=False
        )

    scanned = gameday("ledger", "--scan", "--json", "--db-dsn", dsn)
    assert scanned.returncode == 1, scanned.stderr
    found = {f["ref"]: f for f in json.loads(scanned.stdout)["found"]}
    db_ref = next(ref for ref in found if ref.endswith(name))
    helper_ref = f"helper:{entry_id}"
    assert found[db_ref]["status"] == found[helper_ref]["status"] == "orphan"
    assert pg_server.password not in scanned.stdout + scanned.stderr

    ended = gameday("rollback", "--orphans", "--db-dsn", dsn, "--only", db_ref)
    assert ended.returncode == 0, ended.stderr
    assert _sessions(pg_admin, name) == 0  # the server's own view
    assert _procfs.alive(pid)  # the helper was not asked to go
    stopped = gameday("rollback", "--orphans", "--only", helper_ref)
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: not _procfs.alive(pid), 15, "the holder to end")
    kinds = sorted(e.kind for e in Ledger(ledger_path).history() if e.state == "closed")
    assert kinds == ["db-session-orphan", "helper-orphan"]
