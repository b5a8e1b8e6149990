"""Every risk names an experiment (and var-file) that exists; the report section escapes."""

from __future__ import annotations

from support.harness import ROOT

from chaos_ext._products.advise.html import render_risks_html
from chaos_ext._products.advise.risks import EXPERIMENTS, KINDS, Risk
from chaos_ext.cli import COMMANDS


def test_every_kind_names_an_experiment_and_var_file_that_exist() -> None:
    assert set(EXPERIMENTS) == set(KINDS)
    for kind, tested in EXPERIMENTS.items():
        for path in (tested.experiment, tested.var_file):
            assert path is None or (ROOT / path).is_file(), f"{kind}: {path}"


def test_the_command_names_the_var_file() -> None:
    tested = EXPERIMENTS["dns-no-cache"]
    assert tested.command() == (
        "gameday run --var-file experiments/incidents/vars/cluster.example.yaml "
        "experiments/incidents/02-nodelocal-dns-stall.json"
    )
    assert (
        EXPERIMENTS["ndots-5"].command() == "gameday run experiments/dns-search-amplification.json"
    )


def test_the_html_section_lists_each_risk_escaped() -> None:
    risk = Risk("no-pdb", ("Deployment shop/<cart>",), "1 workload & no budget")
    html = render_risks_html([risk])
    assert html.startswith('<section id="advise">') and html.endswith("</section>")
    assert "Deployment shop/&lt;cart&gt;" in html and "1 workload &amp; no budget" in html
    assert "<code>gameday run experiments/node-drain.json</code>" in html
    assert "<script" not in html
    assert "No risk found" in render_risks_html([])


def test_advise_is_a_command() -> None:
    assert any(c.name == "advise" and c.module == "advise" for c in COMMANDS)
