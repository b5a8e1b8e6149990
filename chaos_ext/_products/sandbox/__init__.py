"""The local sandbox: a small platform in network namespaces that fails like real ones.

Hosts (each a network namespace on one bridge): ``app`` (the demo web
service), ``db`` (PostgreSQL), ``dns`` (dnsmasq serving the database's name),
``mon`` (Prometheus, the exporter, the load generator and the game-day runner).
"""
