"""The plan stage: from decisions to a plan file, and back.

``document`` selects the candidates and writes the plan document, ``references`` searches
projects for files that name a candidate, ``reader`` reads a plan file back strictly, and
``records`` are the typed plan and candidates the executor acts on.
"""

__all__: list[str] = []
