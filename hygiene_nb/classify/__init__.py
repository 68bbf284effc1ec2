"""The classify stage: each entry of a snapshot gets a risk, a rule, a claim, a confidence.

``rules`` holds the rule table and user rules, ``protect`` what is never removable (keys, VCS
data, a home's configuration, system directories), ``classification`` applies both to a
snapshot's table, and ``summary`` totals it (risk mix, reclaimable bytes).
"""

__all__: list[str] = []
