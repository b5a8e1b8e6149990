"""A pytest plugin (``-p support.skips_at_collection``): print every test a skip mark skips.

Test-only (the README check, issue 34): with ``--collect-only`` it evaluates
each collected test's ``skip``/``skipif`` marks the way pytest will when it
runs them, and prints ``SKIPPED <node id>`` for each one they skip. A
``pytest.skip()`` called inside a test body is not seen.
"""

from __future__ import annotations

import pytest
from _pytest.skipping import evaluate_skip_marks


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if evaluate_skip_marks(item) is not None:
            print(f"SKIPPED {item.nodeid}")  # noqa: T201 - the plugin's output
