"""The plan stage: from decisions to a plan file, and back.

``document`` selects the candidates and writes the plan document, ``schema`` is what a plan file
is apart from how it is built (its schema name, digest, default lifetime), ``references``
searches projects for files that name a candidate, ``reader`` reads a plan file back strictly,
``records`` are the typed plan and candidates the executor acts on, and ``tally`` keeps the
summary a plan would start from, updated by each decision (the widget's "Plan now" line).
"""

__all__: list[str] = []
