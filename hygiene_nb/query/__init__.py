"""The questions the CLI, the notebooks and the reports ask of the store.

``views`` names every view, over snapshots, decisions and receipts; by noun they live in
``history`` (a root's scans, growth and risk mix over time), ``changes`` (what changed between
two scans), ``review`` (decisions, coverage, what is pending, plans and executions), ``frames``
(the browser, the treemap, a summary's tables) and ``provenance`` (what a report was made
from). ``suggest`` proposes a plan from the rules and says what it would free.
"""

__all__: list[str] = []
