"""The scan stage: walk a tree (never following a symlink) into a Parquet snapshot.

``request`` checks the root and turns excludes into walk options, ``walk`` lists the tree
(a C walker and a pure-Python one, one contract: ``walk.spec``; after editing ``cwalk.c``,
``pip install -e .`` rebuilds it), ``snapshot`` writes and reads the Parquet files, ``index``
is the store's index of scans (finding, listing, pruning; no Parquet), ``digests`` computes
each directory's digest once per snapshot (what a decision was made on).
"""

__all__: list[str] = []
