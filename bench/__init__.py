"""The hygiene-nb benchmark: a generated tree, du/find baselines and per-stage timings."""
