"""Envoy configuration: audit a ``/config_dump`` or bootstrap against a rule profile, write the fix.

Pure core: :mod:`._input` / :mod:`._lean` (decode and classify), :mod:`._dump`
and :mod:`._hcm` (the parts an audit reads), :mod:`._role`, :mod:`._rules` and
:mod:`._profiles` (rules as data), :mod:`._audit` and :mod:`._report`,
:mod:`._fix`, :mod:`._merge`, :mod:`._apply`, :mod:`._fix_envoy`,
:mod:`._fix_istio` (fixes and how Envoy/Istio merge them). Shell:
:mod:`._fetch` (admin URL, file, stdin, Kubernetes pod), :mod:`._pipeline`,
:mod:`._fix_write`. Activities: :mod:`.probes`.
"""
