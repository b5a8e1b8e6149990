"""Architecture rules that import-linter alone does not check (see CONTRIBUTING.md).

* every top-level module and package of ``chaos_ext`` is in a layer of the
  import-linter contract, so nothing escapes the layering;
* no package imports another package's private (underscore) modules: what
  crosses a package boundary goes through a public module;
* library code changes no process-wide state (garbage collector, warnings
  filters, the kubernetes module's defaults);
* only ``chaos_ext._procfs`` reads this machine's ``/proc`` (commands run on
  a node, such as ``cat /proc/self/status`` over SSH, are not reads here).

Each rule is a function returning its findings, so a test of the test can
feed it a bad example and see it fail.
"""

from __future__ import annotations

import ast
import pkgutil
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import chaos_ext

ROOT = Path(chaos_ext.__file__).parent
PYPROJECT = ROOT.parent / "pyproject.toml"

# The CLI owns its process: it may set process-wide things (signal handlers, NO_COLOR...).
_PROCESS_OWNERS = ("cli",)
_SIDE_EFFECTS = {
    "gc.disable": re.compile(r"\bgc\.(disable|freeze|set_threshold)\("),
    "a global warnings filter": re.compile(r"\bwarnings\.(filterwarnings|simplefilter)\("),
    "the kubernetes module's defaults": re.compile(
        r"KUBE_CONFIG_DEFAULT_LOCATION\s*=|Configuration\.set_default\(|"
        r"client\.Configuration\.\w+\s*="
    ),
    "a process-wide socket timeout": re.compile(r"socket\.setdefaulttimeout\("),
    "the root logger's setup": re.compile(r"logging\.basicConfig\("),
}

# A local read of /proc: a call whose first argument is a /proc path, such as
# Path("/proc/..."), open("/proc/..."), os.listdir("/proc"), _read("/proc/...").
_PROC_READ = re.compile(r"""\w\(\s*f?["']/proc\b""")


def proc_reads(source: str) -> list[str]:
    """Lines of ``source`` that read ``/proc`` themselves instead of through ``_procfs``."""
    return [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(source.splitlines(), 1)
        if _PROC_READ.search(line)
    ]


_K8S_LOADERS = ("load_kube_config", "load_incluster_config", "new_client_from_config")


def layered_names() -> set[str]:
    """Every name in the import-linter layers contract, e.g. ``chaos_ext._k8s``."""
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["type"] == "layers")["layers"]
    return {
        name.strip(" ()")
        for layer in layers
        for name in re.split(r"[|:]", layer)
        if name.strip(" ()")
    }


def unlayered(names: set[str], root: Path = ROOT, package: str = "chaos_ext") -> list[str]:
    """Top-level modules and packages under ``root`` that no layer names."""
    found = [f"{package}.{m.name}" for m in pkgutil.iter_modules([str(root)])]
    return sorted(name for name in found if name not in names)


def _imports(tree: ast.AST) -> Iterator[tuple[int, list[str]]]:
    """``(line, modules)`` of each import: ``from a import _b`` gives ``a`` and ``a._b``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            yield node.lineno, [a.name for a in node.names]


def _private_of_another(module: str, package: str) -> bool:
    parts = module.split(".")
    if len(parts) < 3 or parts[0] != "chaos_ext" or parts[1] == package:
        return False
    return any(p.startswith("_") for p in parts[2:])


def private_imports(source: str, package: str) -> list[str]:
    """Imports in ``package``'s code of another package's underscore modules (one per line)."""
    found = []
    for line, modules in _imports(ast.parse(source)):
        private = [m for m in modules if _private_of_another(m, package)]
        if private:
            found.append(f"line {line}: {private[0]}")
    return found


def side_effects(source: str) -> list[str]:
    """Process-wide changes in ``source`` (comments and docstrings excluded)."""
    code = "\n".join(
        line.split("#", 1)[0]
        for line in source.splitlines()
        if not line.lstrip().startswith(("#", '"', "'"))
    )
    found = [what for what, pattern in _SIDE_EFFECTS.items() if pattern.search(code)]
    for node in ast.walk(ast.parse(source)):
        # kubernetes' loaders write its default Configuration unless given one of ours
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in _K8S_LOADERS
            and not any(k.arg == "client_configuration" for k in node.keywords)
        ):
            found.append("the kubernetes module's default configuration")
    return found


def _sources() -> Iterator[tuple[Path, str]]:
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        package = relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 else ""
        yield path, package


def test_every_module_is_in_a_layer() -> None:
    assert unlayered(layered_names()) == []


def test_no_package_imports_another_packages_private_modules() -> None:
    found = {
        str(path.relative_to(ROOT)): problems
        for path, package in _sources()
        if (problems := private_imports(path.read_text(), package))
    }
    assert found == {}


def test_library_code_changes_no_process_wide_state() -> None:
    found = {
        str(path.relative_to(ROOT)): problems
        for path, package in _sources()
        if package not in _PROCESS_OWNERS and (problems := side_effects(path.read_text()))
    }
    assert found == {}


def test_only_procfs_reads_proc() -> None:
    found = {
        str(path.relative_to(ROOT)): problems
        for path, _ in _sources()
        if path.name != "_procfs.py" and (problems := proc_reads(path.read_text()))
    }
    assert found == {}


# -- the rules catch what they are meant to catch -------------------------------------


def test_a_module_outside_every_layer_is_found(tmp_path: Path) -> None:
    (tmp_path / "newdomain").mkdir()
    (tmp_path / "newdomain" / "__init__.py").write_text("")
    (tmp_path / "_helper.py").write_text("")
    assert unlayered({"chaos_ext._helper"}, tmp_path) == ["chaos_ext.newdomain"]
    assert "chaos_ext.network" in layered_names() and "chaos_ext._procfs" in layered_names()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "from chaos_ext.prometheus._client import client",
            ["line 1: chaos_ext.prometheus._client"],
        ),
        ("from chaos_ext.network import _local", ["line 1: chaos_ext.network._local"]),
        ("import chaos_ext.runner._envelope", ["line 1: chaos_ext.runner._envelope"]),
        (
            "from chaos_ext.envoy._pipeline import (\n    run_audit,\n)",
            ["line 1: chaos_ext.envoy._pipeline"],
        ),
        ("from chaos_ext.dns._book import Book", []),  # the same package
        ("from chaos_ext._targets import netns", []),  # a plumbing package's public module
        ("from chaos_ext.controls.stop_conditions import load_plan", []),
        ("from chaos_ext import _procfs", []),
    ],
)
def test_private_imports_are_found(source: str, expected: list[str]) -> None:
    assert [p.split(" (")[0] for p in private_imports(source, "dns")] == expected


@pytest.mark.parametrize(
    "source",
    [
        "import gc\ngc.disable()",
        "warnings.filterwarnings('ignore', category=UserWarning)",
        "kube_config.KUBE_CONFIG_DEFAULT_LOCATION = path",
        "config.load_kube_config(context=ctx)",
        "client.Configuration.verify_ssl = False",
    ],
)
def test_side_effects_are_found(source: str) -> None:
    assert side_effects(source)


def test_scoped_equivalents_pass() -> None:
    source = (
        "kube_config.load_kube_config(config_file=f, context=c, client_configuration=conf)\n"
        "with warnings.catch_warnings(record=True):\n    pass\n"
        "# gc.disable() would change every thread\n"
    )
    assert side_effects(source) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('stat = Path(f"/proc/{pid}/stat").read_text()', 1),
        ('with open("/proc/self/status") as f:', 1),
        ('_read("/etc/machine-id"), os.path.exists(f"/proc/{pid}")', 1),
        ('"boot_id": _read("/proc/sys/kernel/random/boot_id"),', 1),
        ('session.check(["cat", "/proc/self/status"])', 0),  # on a node, over SSH
        ('prefix = ["nsenter", f"--net=/proc/{pid}/ns/net"]', 0),
        ("_procfs.exists(pid)", 0),
    ],
)
def test_proc_reads_are_found(source: str, expected: int) -> None:
    assert len(proc_reads(source)) == expected
