"""The shared plumbing under the fault domains: the ledger, targets, clients and small helpers.

Nothing here knows a fault domain. The fault domains (``chaos_ext.<domain>``),
the runner (``chaos_ext._runner``), the products (``chaos_ext._products``) and
the CLI build on it; it imports none of them. Kept import-free so that
``gameday --help`` pays only for what it uses.
"""
