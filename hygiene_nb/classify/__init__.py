"""The classify stage: each entry of a snapshot gets a risk, a rule, a claim, a confidence.

``rules`` holds the built-in rule table and the user's rules from ``rules.toml`` (the rules
remembered in the ledger are ``hygiene_nb.api.remembered``), ``protect`` what is never
removable (credentials and keys, version-control data and git-tracked files, keep markers,
homes and their configuration, the store, system directories), ``classification`` applies both
to a snapshot's table, ``stored`` keeps the verdicts beside the snapshot (computed once per
key), ``queries`` sums the snapshot and its verdicts in SQL, and ``summary`` defines the same
figures over an Arrow table (risk mix, reclaimable bytes).
"""

__all__: list[str] = []
