"""Envoy edge configuration: audit a live ``/config_dump`` against edge best practices.

Pure core: :mod:`._dump` (parse the v3 admin ConfigDump), :mod:`._rules` (rules
as data, evaluation), :mod:`._report` (the JSON report). Shell: :mod:`._fetch`
(admin URL, file, Kubernetes pod). Activities: :mod:`.probes`.
"""
