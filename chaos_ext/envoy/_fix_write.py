"""Write a fix to a directory, with a README that says how to apply it and check it."""

from __future__ import annotations

from pathlib import Path

from chaos_ext.envoy._fix import build_plan
from chaos_ext.envoy._fix_envoy import FixFiles, envoy_fix
from chaos_ext.envoy._fix_istio import istio_fix
from chaos_ext.envoy._pipeline import AuditRun
from chaos_ext.errors import EnvoyError, InvalidArgument

__all__ = ["FIX_KINDS", "write_fix"]

FIX_KINDS = ("istio", "envoy")


def _readme(kind: str, run: AuditRun, out: FixFiles, rules: list[str]) -> str:
    lines = [f"# Fix written by `gameday audit envoy --fix {kind}`", "",
             f"Audited: {run.origin} ({run.report['input']['description']}, "
             f"{run.role.role}, profile {run.profile.name}).", "",
             f"Rules it fixes: {', '.join(rules) or 'none'}.", "", "## Files", ""]  # fmt: skip
    lines += [f"- `{name}`" for name in sorted(out.files)]
    lines += ["", "## Checked before writing", ""] + [f"- {line}" for line in out.lines]
    if kind == "istio":
        ns, name = run.role.namespace or "istio-system", run.role.workload or "istio-ingressgateway"
        lines += ["", "## Apply, then re-audit the live proxy", "", "```sh",
                  "kubectl apply -f custom-bootstrap-configmap.yaml -f envoyfilter.yaml",
                  f"kubectl -n {ns} patch deployment {name} --type strategic \\",
                  "    --patch-file gateway-deployment-patch.yaml   # or ...-noninjected.yaml",
                  f"kubectl -n {ns} rollout status deployment {name}",
                  f"gameday audit envoy --source 'pod://{ns}?selector=istio=ingressgateway' "
                  f"--profile {run.profile.name}", "```"]  # fmt: skip
    else:
        lines += ["", "## Apply, then re-audit", "", "```sh",
                  'envoy -c bootstrap.yaml --config-yaml "$(cat envoy-overlay.yaml)"',
                  "# or deploy envoy-bootstrap.patched.* as the bootstrap, then:",
                  "gameday audit envoy --source http://127.0.0.1:9901 "
                  f"--profile {run.profile.name}",
                  "```"]  # fmt: skip
    return "\n".join(lines) + "\n"


def write_fix(run: AuditRun, kind: str, directory: str) -> FixFiles:
    """Plan, render, re-audit and write the fix; the files and what was checked."""
    if kind not in FIX_KINDS:
        raise InvalidArgument(f"fix: {kind!r} is not one of {', '.join(FIX_KINDS)}")
    if kind == "istio" and run.role.role != "gateway":
        raise EnvoyError(
            f"{run.origin}: --fix istio writes manifests for an Istio gateway, but this proxy "
            f"is {run.role.role} ({run.role.evidence}); use --fix envoy, or --role gateway"
        )
    plan = build_plan(run)
    out = istio_fix(run, plan) if kind == "istio" else envoy_fix(run, plan)
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name, text in out.files.items():
            (target / name).write_text(text, encoding="utf-8")
        (target / "README.md").write_text(_readme(kind, run, out, plan.rules), encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"output directory {directory!r}: {exc.strerror or exc}") from None
    out.files["README.md"] = (target / "README.md").read_text(encoding="utf-8")
    return out
