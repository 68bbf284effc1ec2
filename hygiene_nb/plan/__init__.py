"""The plan stage: from decisions to a plan file, and back.

``document`` selects the candidates and writes the plan document, ``schema`` is what a plan file
is apart from how it is built (its schema name, digest, default lifetime), ``references``
searches projects for files that name a candidate, ``reader`` reads a plan file back strictly,
and ``records`` are the typed plan and candidates the executor acts on.
"""

__all__: list[str] = []
