"""The questions the CLI, the notebooks and the reports ask of the store.

``views`` answers them over snapshots, decisions and receipts (history, growth, the risk mix,
pending decisions, plans and executions); ``suggest`` proposes a plan from the rules and says
what it would free.
"""

__all__: list[str] = []
