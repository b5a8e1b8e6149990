"""Each fault domain owns its error; ``chaos_ext/errors.py`` holds the shared tree.

* ``chaos_ext/errors.py`` defines the root and the bases every layer shares:
  no class there is named for a fault domain, or says one in its docstring;
* every domain's ``errors.py`` defines its errors as subclasses of
  ``ChaosExtError`` (so ``except ChaosExtError`` / ``except ActivityFailed``
  catch them as before), and the one tree in ``chaos_ext.errors``'s docstring
  says where each lives.

The rules are functions returning their findings, so a bad example can be fed
to them and seen to fail.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
from chaoslib.exceptions import ActivityFailed

import chaos_ext
from chaos_ext import errors

ROOT = Path(chaos_ext.__file__).parent

# The fault domains (the import-linter independence contract) and the sandbox,
# as words a class name or docstring would use. Kubernetes and Prometheus are
# not here on purpose: ``_core`` raises those errors (the cluster API, the
# metrics source), and ``_core`` may not import a fault domain.
DOMAIN_WORDS = ("network", "dns", "db", "database", "sidecar", "envoy", "load", "sandbox")
_DOMAIN_WORD = re.compile(r"\b(" + "|".join(DOMAIN_WORDS) + r")\b", re.IGNORECASE)
_CAMEL_PART = re.compile(r"[A-Z][a-z]*|[a-z]+")

# Where each domain's error lives now (issue #50).
HOMES = {
    "chaos_ext.network.errors": "NetworkError",
    "chaos_ext.dns.errors": "DnsError",
    "chaos_ext.db.errors": "DatabaseError",
    "chaos_ext.sidecar.errors": "SidecarError",
    "chaos_ext.envoy.errors": "EnvoyError",
    "chaos_ext.load.errors": "LoadError",
    "chaos_ext._products.sandbox.errors": "SandboxError",
}


def domain_classes(source: str) -> list[str]:
    """Classes of ``source`` named for a fault domain, or whose docstring names one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        parts = {part.lower() for part in _CAMEL_PART.findall(node.name)}
        named = sorted(parts & set(DOMAIN_WORDS))
        said = _DOMAIN_WORD.search(ast.get_docstring(node) or "")
        if named:
            found.append(f"{node.name}: named for {named[0]}")
        elif said:
            found.append(f"{node.name}: its docstring names {said.group(0)!r}")
    return found


def domain_error_modules() -> list[str]:
    """Every ``errors`` module of the package but the root one, as a dotted name."""
    return sorted(
        ".".join(("chaos_ext", *path.relative_to(ROOT).with_suffix("").parts))
        for path in ROOT.rglob("errors.py")
        if path.parent != ROOT
    )


def error_problems(module_name: str, tree: str) -> list[str]:
    """What is wrong with one domain's errors module: bases, and its line in ``tree``."""
    module = importlib.import_module(module_name)
    problems = []
    for name, value in vars(module).items():
        if not inspect.isclass(value) or value.__module__ != module_name:
            continue
        if not issubclass(value, errors.ChaosExtError):
            problems.append(f"{module_name}.{name} is not a ChaosExtError")
        if not re.search(rf"\b{name}\b\s+{re.escape(module_name)}:", tree):
            problems.append(
                f"{module_name}.{name} is not in chaos_ext.errors' tree with its module"
            )
        if hasattr(errors, name):
            problems.append(f"{name} is still defined or re-exported by chaos_ext.errors")
    return problems


def test_errors_py_names_no_fault_domain() -> None:
    assert domain_classes((ROOT / "errors.py").read_text()) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class NetworkError(ChaosExtError):\n    '''x'''\n", ["NetworkError: named for network"]),
        ("class DbGone(ChaosExtError):\n    '''x'''\n", ["DbGone: named for db"]),
        (
            "class Flood(ChaosExtError):\n    '''The DNS flood failed.'''\n",
            ["Flood: its docstring names 'DNS'"],
        ),
        ("class TransportError(ChaosExtError):\n    '''SSH failed; cannot be loaded.'''\n", []),
    ],
)
def test_domain_classes_are_found(source: str, expected: list[str]) -> None:
    assert domain_classes(source) == expected


def test_each_domain_error_lives_in_its_domain() -> None:
    assert set(HOMES) <= set(domain_error_modules())
    for module_name, name in HOMES.items():
        error = getattr(importlib.import_module(module_name), name)
        assert issubclass(error, errors.ChaosExtError)
        assert issubclass(error, ActivityFailed)


def test_every_domain_error_subclasses_the_root_and_is_in_the_tree() -> None:
    tree = errors.__doc__ or ""
    problems = [p for module in domain_error_modules() for p in error_problems(module, tree)]
    assert problems == []


def test_a_domain_error_missing_from_the_tree_is_found() -> None:
    assert error_problems("chaos_ext.dns.errors", "DnsError  somewhere else") == [
        "chaos_ext.dns.errors.DnsError is not in chaos_ext.errors' tree with its module"
    ]
