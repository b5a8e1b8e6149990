"""The probe catalog: named steady-state probes kept as data.

The files live in the package, in ``chaos_ext/prometheus/catalog/`` (so every
build of the package has them: the wheel, the runner image); ``probes/`` at the
top of the checkout is a link to that folder.

A catalog file maps probe names to entries::

    probes:
      http-error-ratio:
        description: Share of HTTP requests answered with a 5xx status.
        watches: DB latency or connection exhaustion surfacing as errors at the edge.
        promql: |
          sum(rate(http_requests_total{job="${job}", code=~"5.."}[${window}]))
          / sum(rate(http_requests_total{job="${job}"}[${window}]))
        parameters:
          job: {default: api, kind: label, description: scrape job of the service}
          window: {default: 2m, kind: duration}
        tolerance: {op: "<", threshold: 0.01}    # or {range: [low, high]}
        unit: ratio
        if_nan: 0                                  # no traffic: 0/0 counts as no errors

``${name}`` placeholders are filled from ``parameters`` (defaults first); each
value is checked against its kind before it reaches PromQL: ``label`` and
``regex`` (no quote, no newline), ``duration`` (``5m``), ``number``, ``name``
(a metric or label name). ``if_empty`` / ``if_nan`` say what value an empty
answer or NaN stands for; without them such an answer is an
:class:`~chaos_ext.errors.EmptyResult`.

Catalogs are read from the built-in catalog (``probes/*.yaml``), then from
every file or directory
listed in ``GAMEDAY_PROBE_CATALOG`` (``os.pathsep``-separated); a later layer
may redefine a name (to tune a threshold), one layer may not. Built-in abort
plans live beside it in ``catalog/abort/`` and are named by their file stem
(``gameday run --abort-on edge``).
"""

from __future__ import annotations

import difflib
import math
import os
import re
import stat
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from chaos_ext._core.prometheus_api.promql import check_promql
from chaos_ext._core.prometheus_api.results import Condition, parse_duration
from chaos_ext.errors import InvalidArgument

__all__ = [
    "BUILTIN_ABORT_DIR",
    "BUILTIN_DIR",
    "CATALOG_ENV",
    "Catalog",
    "CatalogProbe",
    "Parameter",
    "builtin_abort_plans",
    "catalog_files",
    "default_catalog",
    "load_catalog",
    "parse_entries",
]

BUILTIN_DIR = Path(__file__).resolve().parent / "catalog"
BUILTIN_ABORT_DIR = BUILTIN_DIR / "abort"
CATALOG_ENV = "GAMEDAY_PROBE_CATALOG"

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: 10x faster, as safe
_KINDS = ("label", "regex", "duration", "number", "name")
# what stands for a required parameter when an entry's PromQL is parsed at load time
_SAMPLE = {"label": "x", "regex": ".*", "duration": "5m", "number": "1", "name": "x"}
_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
_PROBE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")
_ENTRY_KEYS = {
    "description",
    "watches",
    "promql",
    "parameters",
    "tolerance",
    "unit",
    "if_empty",
    "if_nan",
    "better",
}
_LOWER_OPS = ("<", "<=", "==")  # "== 0": a count of bad things; anything else below the line


def _better(spec: Mapping[str, Any], tolerance: Condition, where: str) -> str:
    """Which way is better for the probe's value: ``better:``, else from its tolerance."""
    declared = spec.get("better")
    if declared is not None:
        if declared not in ("lower", "higher"):
            raise InvalidArgument(f"{where}: better must be lower or higher, got {declared!r}")
        return str(declared)
    if tolerance.op == "between":
        return "higher" if tolerance.high == 1 else "lower"
    return "lower" if tolerance.op in _LOWER_OPS else "higher"


@dataclass(frozen=True)
class Parameter:
    """A ``${name}`` placeholder of a catalog PromQL template."""

    name: str
    kind: str = "label"
    default: str | None = None
    description: str = ""

    def check(self, value: Any, probe: str) -> str:
        text = str(value)
        where = f"probe {probe}: parameter {self.name}={value!r}"
        if self.kind in ("label", "regex") and ('"' in text or "\n" in text):
            raise InvalidArgument(f"{where} may not contain a double quote or a newline")
        if self.kind == "label" and "\\" in text:
            raise InvalidArgument(f"{where} may not contain a backslash")
        if self.kind == "duration":
            parse_duration(text, where)
        if self.kind == "number":
            try:
                number = float(text)
            except ValueError:
                number = math.nan
            if not math.isfinite(number):
                raise InvalidArgument(f"{where} is not a finite number")
        if self.kind == "name" and not _NAME.match(text):
            raise InvalidArgument(f"{where} is not a metric or label name")
        return text


@dataclass(frozen=True)
class CatalogProbe:
    """One named probe of the catalog."""

    name: str
    promql: str
    description: str
    watches: str
    tolerance: Condition
    parameters: Mapping[str, Parameter] = field(default_factory=dict)
    unit: str = ""
    if_empty: float | None = None
    if_nan: float | None = None
    source: str = ""
    better: str = "lower"  # which way is better for the value (``gameday compare``)

    def render(self, values: Mapping[str, Any] | None = None) -> str:
        """The PromQL with every placeholder filled and checked."""
        given = dict(values or {})
        unknown = sorted(set(given) - set(self.parameters))
        if unknown:
            raise InvalidArgument(
                f"probe {self.name}: unknown parameter(s) {unknown}; "
                f"it takes {sorted(self.parameters) or 'none'}"
            )
        filled: dict[str, str] = {}
        for name, param in self.parameters.items():
            value = given.get(name, param.default)
            if value is None:
                raise InvalidArgument(f"probe {self.name}: parameter {name} is required")
            filled[name] = param.check(value, self.name)
        expr = string.Template(self.promql).substitute(filled).strip()
        return check_promql(expr, f"probe {self.name}: promql")


class Catalog:
    """Probes by name."""

    def __init__(self, probes: Mapping[str, CatalogProbe]) -> None:
        self.probes = dict(probes)

    def __contains__(self, name: object) -> bool:
        return name in self.probes

    def names(self) -> list[str]:
        return sorted(self.probes)

    def get(self, name: str) -> CatalogProbe:
        try:
            return self.probes[name]
        except KeyError:
            close = difflib.get_close_matches(str(name), self.probes, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InvalidArgument(
                f"no probe {name!r} in the catalog ({len(self.probes)} probes){hint}"
            ) from None


def _optional_float(raw: Any, where: str) -> float | None:
    if raw is None:
        return None
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{where}: {raw!r} is not a number") from None


def _parameters(raw: Any, where: str) -> dict[str, Parameter]:
    params: dict[str, Parameter] = {}
    for name, given in (raw or {}).items():
        spec = given if isinstance(given, Mapping) else {"default": given}
        kind = str(spec.get("kind", "label"))
        if kind not in _KINDS or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(name)):
            raise InvalidArgument(f"{where}: parameter {name!r} (kind {kind!r}; kinds: {_KINDS})")
        default = spec.get("default")
        param = Parameter(
            str(name),
            kind,
            None if default is None else str(default),
            str(spec.get("description", "")),
        )
        if param.default is not None:
            param.check(param.default, where)
        params[str(name)] = param
    return params


def _entry(name: str, spec: Any, source: str) -> CatalogProbe:
    where = f"{source}: probe {name}"
    if not _PROBE_NAME.match(name):
        raise InvalidArgument(f"{where}: names are lowercase words joined by '-'")
    if not isinstance(spec, Mapping) or not spec.get("promql") or "tolerance" not in spec:
        raise InvalidArgument(f"{where}: needs at least promql and tolerance")
    extra = sorted(set(spec) - _ENTRY_KEYS)
    if extra:
        raise InvalidArgument(f"{where}: unknown key(s) {extra}")
    params = _parameters(spec.get("parameters"), where)
    template = string.Template(str(spec["promql"]))
    used = set(template.get_identifiers()) if template.is_valid() else None
    if used is None or used - set(params):
        raise InvalidArgument(f"{where}: placeholders {used} need a parameters entry each")
    tolerance = Condition.from_spec(spec["tolerance"], where)
    probe = CatalogProbe(
        name=name,
        promql=str(spec["promql"]),
        description=str(spec.get("description", "")),
        watches=str(spec.get("watches", "")),
        tolerance=tolerance,
        parameters=params,
        better=_better(spec, tolerance, where),
        unit=str(spec.get("unit", "")),
        if_empty=_optional_float(spec.get("if_empty"), where),
        if_nan=_optional_float(spec.get("if_nan"), where),
        source=source,
    )
    samples = {n: _SAMPLE[p.kind] for n, p in params.items() if p.default is None}
    try:
        probe.render(samples)  # the template, filled with defaults, must be valid PromQL
    except InvalidArgument as exc:
        raise InvalidArgument(f"{source}: {exc}") from None
    return probe


def parse_entries(document: Any, source: str) -> dict[str, CatalogProbe]:
    """Entries of one parsed YAML document (``{probes: {name: entry}}``)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("probes"), Mapping):
        raise InvalidArgument(f"{source}: a catalog file is a mapping with a 'probes' mapping")
    return {str(n): _entry(str(n), spec, source) for n, spec in document["probes"].items()}


_LISTINGS: dict[tuple[str, int], list[Path]] = {}


def _files(path: Path) -> list[Path]:
    """The catalog files of ``path`` (a directory's ``*.yaml``/``*.yml``, or the file).

    A directory is listed again only when its modification time changes (a file added,
    removed or renamed): a probe reads the catalog on every call."""
    try:
        mode, mtime_ns = (found := os.stat(path)).st_mode, found.st_mtime_ns
    except OSError:
        mode, mtime_ns = 0, 0
    if stat.S_ISDIR(mode):
        key = (str(path), mtime_ns)
        if key not in _LISTINGS:
            if len(_LISTINGS) > 64:
                _LISTINGS.clear()
            _LISTINGS[key] = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        return _LISTINGS[key]
    if stat.S_ISREG(mode):
        return [path]
    raise InvalidArgument(f"probe catalog {str(path)!r} does not exist")


def catalog_files(extra: str | None = None) -> list[list[Path]]:
    """Layers of catalog files: the built-in catalog, then GAMEDAY_PROBE_CATALOG."""
    layers = [_files(BUILTIN_DIR)]  # shipped in the package: missing is a broken install
    raw = os.environ.get(CATALOG_ENV, "") if extra is None else extra
    layers.extend(_files(Path(p)) for p in raw.split(os.pathsep) if p.strip())
    return layers


def builtin_abort_plans() -> dict[str, Path]:
    """The abort plans shipped with the package, by name (file stem)."""
    return {p.stem: p for p in _files(BUILTIN_ABORT_DIR)} if BUILTIN_ABORT_DIR.is_dir() else {}


def load_catalog(layers: Iterable[Iterable[Path]]) -> Catalog:
    """Read catalog layers; a name defined twice in one layer is an error."""
    probes: dict[str, CatalogProbe] = {}
    for files in layers:
        layer: dict[str, CatalogProbe] = {}
        for path in files:
            try:
                document = yaml.load(path.read_text(), Loader=_LOADER)  # noqa: S506 - a safe loader
            except (OSError, yaml.YAMLError) as exc:
                raise InvalidArgument(f"probe catalog {path}: {exc}") from exc
            for name, entry in parse_entries(document, str(path)).items():
                if name in layer:
                    first = layer[name].source
                    raise InvalidArgument(f"probe {name} defined twice ({first}, {path})")
                layer[name] = entry
        probes.update(layer)
    return Catalog(probes)


_CACHE: dict[tuple[tuple[str, int], ...], Catalog] = {}


def default_catalog() -> Catalog:
    """The catalog of this process (re-read when a file changes)."""
    layers = catalog_files()
    key = tuple((str(p), os.stat(p).st_mtime_ns) for files in layers for p in files)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = load_catalog(layers)
    return _CACHE[key]
