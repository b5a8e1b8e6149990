"""`chaos discover chaos_ext` lists every activity with its right type."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

from chaos_ext import activity_modules, discover

CHAOS = Path(sys.executable).with_name("chaos")


def test_every_activity_has_the_type_of_its_module() -> None:
    found = discover()["activities"]
    assert found, "no activities discovered"
    by_name = {(a["mod"], a["name"]): a for a in found}
    for module_name, kind in activity_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            activity = by_name[(module_name, name)]
            assert activity["type"] == kind, f"{module_name}.{name} is listed as {activity['type']}"
            expected = "action" if module_name.endswith(".actions") else "probe"
            assert activity["type"] == expected
            doc = (activity["doc"] or "").strip().splitlines()
            assert doc and len(doc[0]) > 15, f"{module_name}.{name} needs a one-line doc"
    assert len(by_name) == len(found), "an activity is listed twice"


def test_all_is_exactly_the_public_functions() -> None:
    for module_name, _ in activity_modules():
        module = importlib.import_module(module_name)
        public = {
            name
            for name, obj in vars(module).items()
            if inspect.isfunction(obj) and obj.__module__ == module.__name__
            and not name.startswith("_")
        }  # fmt: skip
        assert set(module.__all__) == public, module_name


def test_activity_signatures_are_json_friendly_with_injected_last() -> None:
    for activity in discover()["activities"]:
        names = [a["name"] for a in activity["arguments"]]
        injected = [n for n in names if n in ("configuration", "secrets")]
        assert names[len(names) - len(injected) :] == injected, activity["name"]
        for argument in activity["arguments"]:
            if argument["name"] in ("configuration", "secrets"):
                continue
            assert argument.get("type") in {
                "string", "integer", "number", "boolean", "list", "mapping", "object", None,
            }, (activity["name"], argument)  # fmt: skip


def test_chaos_discover_cli(tmp_path: Path) -> None:
    out = tmp_path / "discovery.json"
    result = subprocess.run(
        [str(CHAOS), "discover", "--no-install", "--no-system-info",
         "--discovery-path", str(out), "chaos_ext"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    listed = json.loads(out.read_text())["activities"]
    assert {(a["name"], a["type"]) for a in listed} >= {
        ("rollback_faults", "action"),
        ("open_faults", "probe"),
    }
