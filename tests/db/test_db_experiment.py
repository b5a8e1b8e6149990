"""experiments/db-exhaustion.json end to end: real database, real Prometheus, a real app.

The shipped experiment is run unchanged through `gameday run`, its settings
given as environment variables and the credentials with --var-file. A pooled
app keeps serving with 10 slots left (held, exit 0); an app that opens a
connection per request runs out of them (deviated, exit 1). Both on
PostgreSQL and on MariaDB (the MySQL protocol, Aurora MySQL's story).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from support.dbapp import Traffic, serve
from support.dbtest import PASSWORD, Db
from support.harness import ROOT, cli_env, gameday_argv, wait_for

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext.db._engines import ConnectParams
from chaos_ext.prometheus.probes import query_value

EXPERIMENT = ROOT / "experiments" / "db-exhaustion.json"


def _held(ledger: Path) -> bool:
    """The slots are held: the action recorded its holder's pid (after opening them all)."""
    return any("pid" in entry.recipe for entry in Ledger(ledger).open_entries())


def _rate_known(url: str) -> bool:
    """rate() needs two scrapes: true once the app's request rate is there."""
    rate = query_value(
        'sum(rate(http_requests_total{job="app"}[2m]))',
        if_empty=0.0,
        configuration={"prometheus_url": url},
    )
    return rate > 0


def test_shipped_experiment_validates_without_any_environment(tmp_path: Path) -> None:
    result = subprocess.run(
        gameday_argv("validate", str(EXPERIMENT)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "GAMEDAY_LEDGER": str(tmp_path / "l.sqlite3"),
            "PYTHONPATH": str(ROOT),
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("strategy", "exit_code"), [("pooled", 0), ("per-request", 1)])
def test_pooled_app_holds_per_request_app_deviates(
    strategy: str, exit_code: int, db: Db, ledger_path: Path, tmp_path: Path
) -> None:
    """Traffic surges from 4 to 20 concurrent requests once the slots are held.

    The pooled app's footprint stays at its 10 pooled connections; the
    per-request app needs up to 20 at once, but only what it used when the
    slots were taken plus 10 are left.
    """
    s = db.server
    params = ConnectParams(db.engine, s.host, s.port, s.database, s.user, s.password, 5.0, "app")
    var_file = tmp_path / "db-secrets.yaml"
    var_file.write_text(yaml.safe_dump({"secrets": {"db": db.secrets}}))
    with serve(params, strategy) as app_url, Traffic(app_url, workers=20, active=4) as traffic:
        port = int(app_url.rsplit(":", 1)[1])
        with prometheus.start(jobs={"app": [f"127.0.0.1:{port}"]}) as prom:
            prom.wait_scraped()
            wait_for(lambda: _rate_known(prom.url), 30, "a request rate in Prometheus")
            env = {
                **cli_env(ledger_path),
                "DB_ENGINE": db.engine,
                "DB_HOST": s.host,
                "DB_PORT": str(s.port),
                "DB_NAME": s.database,
                "HOLD_SECONDS": "60",
                "OBSERVE_SECONDS": "8",
                "APP_READINESS_URL": f"{app_url}/readyz",
                "APP_JOB": "app",
                "PROMETHEUS_URL": prom.url,
            }
            runner = subprocess.Popen(
                # --recover 0: the experiment's error ratio is a rate over 2m, so after a
                # deviation it cannot be back within the default 60 s (exit 5, not-recovered);
                # this test is about held vs deviated, recovery has its own tests
                gameday_argv(
                    "run",
                    "--var-file",
                    str(var_file),
                    "--recover",
                    "0",
                    "--journal",
                    str(tmp_path / "journal.json"),
                    str(EXPERIMENT),
                ),
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            try:
                wait_for(lambda: runner.poll() is not None or _held(ledger_path), 60, "the hold")
                traffic.active = 20
                output, _ = runner.communicate(timeout=180)
            finally:
                if runner.poll() is None:
                    runner.kill()
                    runner.wait(timeout=10)
    assert runner.returncode == exit_code, output
    journal_text = (tmp_path / "journal.json").read_text()
    assert PASSWORD not in journal_text + output
    journal = json.loads(journal_text)
    runs = {r["activity"]["name"]: r for r in journal["run"]}
    held = runs["hold-all-connection-slots-but-10"]["output"]
    assert held["target"] == "max-minus-10"
    assert held["opened"] == held["target_count"]
    after = {p["activity"]["name"]: p for p in journal["steady_states"]["after"]["probes"]}
    if strategy == "pooled":
        assert after["app-error-ratio-below-1-percent"]["output"] == 0
        assert after["app-readiness-answers"]["output"] is True
    else:
        assert after["app-error-ratio-below-1-percent"]["output"] > 0.01
    assert journal["rollbacks"][0]["output"]["undone"] == 1
    assert Ledger(ledger_path).open_entries() == []
    wait_for(lambda: db.client_count() == 1, 15, "the connection count back at its baseline")
