"""The ledger (``ledger.sqlite``): decisions, notes, history, claims, rules and issued plans.

Only this package touches SQLite.

``connection`` opens the file (creating and migrating it by the numbered ``schema``; a file
newer than this code is refused, never altered) and makes every write one ``BEGIN IMMEDIATE``
transaction. Each noun the ledger holds adds its methods to that connection: ``annotations``
(decisions, notes and their history), ``claims``, ``rules`` (remembered rules) and ``plans``
(issued plans, declined suggestions, executions); ``records`` are what they give back.
``Ledger`` is all of them on one connection.
"""

from __future__ import annotations

from hygiene_nb.ledger.annotations import AnnotationLedger
from hygiene_nb.ledger.claims import ClaimLedger
from hygiene_nb.ledger.plans import PlanLedger
from hygiene_nb.ledger.records import DECISIONS, Annotation, Claim, IssuedPlan, display_path
from hygiene_nb.ledger.rules import RuleLedger
from hygiene_nb.ledger.schema import MIGRATIONS, SCHEMA_VERSION

__all__ = [
    "DECISIONS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Annotation",
    "Claim",
    "IssuedPlan",
    "Ledger",
    "display_path",
]


class Ledger(AnnotationLedger, ClaimLedger, RuleLedger, PlanLedger):
    """One connection to the store's ledger; opened with ``Ledger.open(store)``."""
