"""PodDisruptionBudgets as the node package reads them, for other packages (``gameday advise``).

The public face of :mod:`._budgets`: :func:`selector_matches` (does a budget's
selector select these labels) and :func:`budget_of` (its allowance).
"""

from __future__ import annotations

from chaos_ext.node._budgets import Budget, budget_of, selector_matches

__all__ = ["Budget", "budget_of", "selector_matches"]
