"""Architecture rules that import-linter alone does not check (see CONTRIBUTING.md).

* every top-level module and package of ``chaos_ext`` is in a layer of the
  import-linter contract, so nothing escapes the layering;
* no package imports another package's private (underscore) modules: what
  crosses a package boundary goes through a public module;
* library code changes no process-wide state (garbage collector, warnings
  filters, the kubernetes module's defaults);
* only ``chaos_ext._core.procfs`` reads this machine's ``/proc`` (commands run on
  a node, such as ``cat /proc/self/status`` over SSH, are not reads here);
* no module, the CLI included, writes this process's environment: settings
  travel as ``chaos_ext._core.settings.Settings``, a child gets an environment
  built for it.

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
    """Every name in the import-linter layers contracts, e.g. ``chaos_ext._core.k8s``.

    A contract with ``containers`` names modules inside each container.
    """
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    names = set()
    for contract in (c for c in config if c["type"] == "layers"):
        for layer in contract["layers"]:
            for name in (n.strip(" ()") for n in re.split(r"[|:]", layer)):
                containers = contract.get("containers")
                if name and containers:
                    names.update(f"{c}.{name}" for c in containers)
                elif name:
                    names.add(name)
    return names


# the packages that group the non-domain layers (issue #28): each module in them is in a layer too
GROUPS = ("_core", "_products")


def unlayered(names: set[str], root: Path = ROOT, package: str = "chaos_ext") -> list[str]:
    """Top-level modules and packages under ``root``, and those of its groups, in no layer."""
    found = [f"{package}.{m.name}" for m in pkgutil.iter_modules([str(root)])]
    for group in GROUPS:
        if (root / group).is_dir():
            found += [
                f"{package}.{group}.{m.name}" for m in pkgutil.iter_modules([str(root / group)])
            ]
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


_ENVIRON_METHODS = ("update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__")
_ENV_FUNCTIONS = ("putenv", "unsetenv")


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _environ_write(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript | ast.Attribute) and isinstance(
        node.ctx, ast.Store | ast.Del
    ):
        # os.environ[...] = / del os.environ[...] / os.environ = (not a local named environ)
        return _is_environ(node.value) if isinstance(node, ast.Subscript) else _is_environ(node)
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        if func.attr in _ENVIRON_METHODS:
            return _is_environ(func.value)
        return (
            func.attr in _ENV_FUNCTIONS
            and isinstance(func.value, ast.Name)
            and func.value.id == "os"
        )
    return isinstance(func, ast.Name) and func.id in _ENV_FUNCTIONS


def environ_writes(source: str) -> list[str]:
    """Lines of ``source`` that change this process's environment, one finding each."""
    lines = source.splitlines()
    return [
        f"line {node.lineno}: {lines[node.lineno - 1].strip()}"
        for node in ast.walk(ast.parse(source))
        if _environ_write(node)
    ]


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
        if path.relative_to(ROOT).as_posix() != "_core/procfs.py"
        and (problems := proc_reads(path.read_text()))
    }
    assert found == {}


def test_no_module_writes_the_environment() -> None:
    found = {
        str(path.relative_to(ROOT)): problems
        for path, _ in _sources()
        if (problems := environ_writes(path.read_text()))
    }
    assert found == {}, "settings go in chaos_ext._core.settings.Settings, a child's env= its own"


# -- the rules catch what they are meant to catch -------------------------------------


def test_a_module_outside_every_layer_is_found(tmp_path: Path) -> None:
    (tmp_path / "newdomain").mkdir()
    (tmp_path / "newdomain" / "__init__.py").write_text("")
    (tmp_path / "_core").mkdir()
    (tmp_path / "_core" / "__init__.py").write_text("")
    (tmp_path / "_core" / "helper.py").write_text("")
    assert unlayered({"chaos_ext._core", "chaos_ext._core.helper"}, tmp_path) == [
        "chaos_ext.newdomain"
    ]
    (tmp_path / "_core" / "newthing.py").write_text("")
    assert unlayered({"chaos_ext._core", "chaos_ext._core.helper"}, tmp_path) == [
        "chaos_ext._core.newthing",
        "chaos_ext.newdomain",
    ]
    assert "chaos_ext.network" in layered_names() and "chaos_ext._core.procfs" in layered_names()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "from chaos_ext.prometheus._client import client",
            ["line 1: chaos_ext.prometheus._client"],
        ),
        ("from chaos_ext.network import _local", ["line 1: chaos_ext.network._local"]),
        ("import chaos_ext._runner._envelope", ["line 1: chaos_ext._runner._envelope"]),
        (
            "from chaos_ext.envoy._pipeline import (\n    run_audit,\n)",
            ["line 1: chaos_ext.envoy._pipeline"],
        ),
        ("from chaos_ext.dns._tally import FloodTally", []),  # the same package
        ("from chaos_ext._core.targets import netns", []),  # a plumbing package's public module
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
    "source",
    [
        'os.environ["GAMEDAY_LEDGER"] = args.ledger',
        "os.environ[name] += ':/opt'",
        "del os.environ['KUBECONFIG']",
        "os.environ.update({'KUBECONFIG': path})",
        "os.environ.setdefault('X', '1')",
        "os.environ.pop('X', None)",
        "os.environ.clear()",
        "os.putenv('X', '1')",
        "os.unsetenv('X')",
        "from os import environ\nenviron['X'] = '1'",
        "from os import putenv\nputenv('X', '1')",
        "os.environ = {}",
    ],
)
def test_environment_writes_are_found(source: str) -> None:
    assert environ_writes(source), source


def test_environment_reads_and_child_environments_pass() -> None:
    source = (
        "path = os.environ.get('KUBECONFIG') or os.environ['HOME']\n"
        "env = {**os.environ, 'TOKEN': token}\n"
        "env['KUBECONFIG'] = settings.kubeconfig\n"
        "env.update({k: os.environ[k] for k in passed if k in os.environ})\n"
        "subprocess.run(argv, env=env, timeout=5, check=False)\n"
    )
    assert environ_writes(source) == []


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


# -- CONTRIBUTING.md's layer tables are the contracts ---------------------------------------

CONTRIBUTING = ROOT.parent / "CONTRIBUTING.md"


def contract_layers() -> dict[str, list[set[str]]]:
    """Each layers contract's layers as sets of module names, keyed by its container ("" top)."""
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    found = {}
    for contract in (c for c in config if c["type"] == "layers"):
        (container,) = contract.get("containers", [""])
        prefix = f"{container}." if container else ""
        found[container] = [
            {prefix + n.strip(" ()") for n in re.split(r"[|:]", layer) if n.strip(" ()")}
            for layer in contract["layers"]
        ]
    return found


def documented_layers(text: str) -> dict[str, list[set[str]]]:
    """The layer tables of CONTRIBUTING.md: the top one, and one per "Inside `X`" paragraph."""
    tables: dict[str, list[set[str]]] = {}
    container = ""
    for line in text.splitlines():
        inside = re.match(r"Inside `([\w.]+)`", line)
        if inside:
            container = f"chaos_ext.{inside.group(1)}"
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 3 and cells[0] not in ("layer", "---") and not set(cells[0]) <= {"-"}:
            names = {f"chaos_ext.{n}" for n in re.findall(r"`([\w.]+)`", cells[1])}
            tables.setdefault(container, []).append(names)
    return tables


def layer_table_problems(text: str) -> list[str]:
    """Where CONTRIBUTING.md's tables and the contracts disagree, or name what does not exist."""
    problems = []
    documented, contracts = documented_layers(text), contract_layers()
    for container, layers in contracts.items():
        if documented.get(container) != layers:
            problems.append(f"{container or 'top level'}: documented {documented.get(container)}")
    for layers in documented.values():
        for name in set().union(*layers):
            relative = ROOT.joinpath(*name.split(".")[1:])
            if not (relative.is_dir() or relative.with_suffix(".py").is_file()):
                problems.append(f"{name} does not exist")
    return problems


def test_contributing_names_each_module_in_its_layer() -> None:
    assert layer_table_problems(CONTRIBUTING.read_text()) == []


def test_a_module_documented_in_the_wrong_layer_is_found() -> None:
    text = CONTRIBUTING.read_text()
    moved = text.replace(
        "| transports | `_core.k8s` : `_core.ssh` |", "| transports | `_core.k8s` |"
    )
    moved = moved.replace("`_core.procfs` :", "`_core.procfs` : `_core.ssh` :")
    assert moved != text
    assert layer_table_problems(moved) and all("_core" in p for p in layer_table_problems(moved))
    missing = text.replace("`_core.timeline` |", "`_core.timeline` : `_core.gone` |")
    assert "chaos_ext._core.gone does not exist" in layer_table_problems(missing)


# -- signals in one place -------------------------------------------------------------------

# where a signal handler may be set: the runner's signal module, the gameday process's first
# lines (cli/entry.py: before the runner's modules are imported, and after the command is
# done), and the entry points of the processes gameday starts (helpers, the load worker, the
# load pod, the DNS error proxy on a node), each its own process
SIGNAL_HOMES = {
    "_runner/signals.py",
    "cli/entry.py",
    "_core/helper.py",
    "load/_engine.py",
    "load/_pod.py",
    "dns/_dnserr_node.py",
}
_SETS_SIGNAL = re.compile(r"\bsignal\.signal\(|\badd_signal_handler\(")


def signal_setters(sources: dict[str, str]) -> list[str]:
    """Modules (relative path: text) outside :data:`SIGNAL_HOMES` that set a handler."""
    return sorted(
        m for m, text in sources.items() if m not in SIGNAL_HOMES and _SETS_SIGNAL.search(text)
    )


def _package_texts() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p, _ in _sources()}


def test_signal_handlers_are_set_in_one_place() -> None:
    assert signal_setters(_package_texts()) == []


def test_a_module_setting_its_own_handler_is_found() -> None:
    texts = _package_texts()
    texts["_runner/sweep.py"] += "\nprevious = signal.signal(signal.SIGINT, note)\n"
    texts["load/_engine.py"] += "\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    assert signal_setters(texts) == ["_runner/sweep.py"]
