"""``gameday advise``: the seed incidents' risks, read from a cluster before any fault.

:mod:`.risks` names each risk and the experiment that tests it; :mod:`.rules`
finds the risks in fetched objects (pure functions); :mod:`.fetch` reads the
objects (GET and LIST only), the database's connection ceiling, a journal's
measured ceiling, CoreDNS metrics, the sidecar drift and the Envoy audit;
:mod:`.html` renders the risks as a report section.
"""
