"""The server's cause of each 5xx, read from a response header and counted per bucket."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.servers.http_target import HttpTarget

from chaos_ext.errors import InvalidArgument
from chaos_ext.load.driver import background_load, load_results, wait_load
from chaos_ext.load.spec import spec_from_arguments


def _run(token: str, results: Path, **args: object) -> dict[str, object]:
    spec = spec_from_arguments(args)
    with background_load(spec, results_dir=results, token=token):
        assert wait_load(token, timeout=spec.duration + spec.timeout + 15)
    return load_results(results)


def test_each_5xx_is_counted_under_the_cause_its_header_names(
    target: HttpTarget, load_token: Callable[[], str], tmp_path: Path
) -> None:
    target.set_errors(503, every=4, cause="db-connect")
    results = _run(
        load_token(),
        tmp_path,
        urls=[target.url],
        rate=50,
        duration_seconds=3,
        cause_header="x-error-cause",  # header names are case-insensitive
    )
    served = target.stats()
    assert served["errors"] > 0
    # the server's own count of the errors it answered, against the load's
    assert results["causes"] == {"db-connect": served["errors"]}
    assert results["errors"]["http_5xx"] == served["errors"]
    per_bucket = sum(b["causes"].get("db-connect", 0) for b in results["buckets"])
    assert per_bucket == served["errors"]


def test_without_a_cause_header_no_cause_is_read(
    target: HttpTarget, load_token: Callable[[], str], tmp_path: Path
) -> None:
    target.set_errors(503, every=3, cause="dns")
    results = _run(load_token(), tmp_path, urls=[target.url], rate=30, duration_seconds=2)
    assert results["errors"]["http_5xx"] == target.stats()["errors"] > 0
    assert results["causes"] == {}


def test_a_cause_header_that_is_not_a_header_name_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="cause_header"):
        spec_from_arguments({"urls": ["http://127.0.0.1:1/"], "cause_header": "X Cause:"})
