"""The fleet's questions: one SQL text each, run unchanged by DuckDB or Spark SQL.

Each question reads three relations:

- ``scans``: one row per published scan, built from the completion markers (its figures are
  the ones ``hygiene-nb summary`` gives for the scan, computed when it was published);
- ``owners``: per published scan (not redacted), the bytes each owner holds;
- ``dirs``: the published directories (``dirs/…/part-0.parquet`` of the marked partitions,
  listed from the markers, never globbed).

The SQL keeps to the subset both engines share: window functions, ``CAST(sum(…) AS BIGINT)``,
times as integer seconds since the epoch (no time zones to differ), a root's scans ordered by
their start in integer microseconds (two can start in the same second), a total row order
(every ``ORDER BY`` ends on a unique key), and literals substituted for the two parameters
(``{since}``, epoch seconds, and ``{top}``), since the engines spell parameters differently.
"""

from __future__ import annotations

__all__ = ["QUESTIONS", "SQL", "render_sql"]

_RANKED = """
  SELECT s.*, row_number() OVER (
           PARTITION BY host, root ORDER BY started_us DESC, scan DESC) AS nth
  FROM scans s WHERE started_s >= {since}"""

SQL: dict[str, str] = {
    # the latest scan of every host and root, with its growth since the one before
    "summary": f"""
WITH ranked AS ({_RANKED}),
latest AS (SELECT * FROM ranked WHERE nth = 1),
previous AS (SELECT host, root, alloc, started_s, partial FROM ranked WHERE nth = 2)
SELECT l.host, l.root_path AS root, l.scan, l.started_s, l.entries, l.files,
       l.alloc, l.fs_free, l.fs_total,
       CASE WHEN l.partial OR p.partial THEN NULL ELSE l.alloc - p.alloc END AS growth,
       p.started_s AS previous_s,
       l.reclaimable_alloc AS reclaimable, l.stale_alloc AS stale, l.cleanliness,
       l.partial, l.redacted
FROM latest l LEFT JOIN previous p ON p.host = l.host AND p.root = l.root
ORDER BY l.host, l.root_path, l.root
""",
    # every scan: size and free space over time
    "history": """
SELECT host, root_path AS root, scan, started_s, entries, alloc, fs_free, fs_total, partial
FROM scans WHERE started_s >= {since}
ORDER BY host, root_path, root, started_us, scan
""",
    # per host, the growth of every root between its first and its latest scan in the window;
    # a root whose first or latest scan is partial (its sums lower bounds) is counted apart
    "growth": f"""
WITH ranked AS ({_RANKED}),
first AS (
  SELECT host, root, alloc, started_s, partial, row_number() OVER (
           PARTITION BY host, root ORDER BY started_us, scan) AS nth_first
  FROM scans WHERE started_s >= {{since}}),
latest AS (SELECT * FROM ranked WHERE nth = 1),
earliest AS (SELECT * FROM first WHERE nth_first = 1),
hosts AS (
  SELECT l.host, count(*) AS roots, CAST(sum(l.alloc) AS BIGINT) AS alloc,
         CAST(sum(CASE WHEN l.partial OR e.partial THEN 0 ELSE l.alloc - e.alloc END)
              AS BIGINT) AS growth,
         sum(CASE WHEN l.partial OR e.partial THEN 1 ELSE 0 END) AS partial_roots,
         min(e.started_s) AS since_s, max(l.started_s) AS latest_s
  FROM latest l JOIN earliest e ON e.host = l.host AND e.root = l.root
  GROUP BY l.host)
SELECT host, roots, alloc, growth, partial_roots, since_s, latest_s FROM hosts
ORDER BY growth DESC, host
""",
    # the directories that grew most across the fleet, latest scan against the one before:
    # only those the scan before could have published (within its depth), neither sum a lower
    # bound (partial), paired by their exact path (``key``)
    "top_dirs": f"""
WITH ranked AS ({_RANKED}),
pick AS (SELECT host, root, root_path, scan, nth, depth_limit FROM ranked WHERE nth <= 2),
before_scan AS (SELECT host, root, depth_limit FROM pick WHERE nth = 2),
d AS (
  SELECT d.host, d.root, p.root_path, d.path, d.key, d.depth, d.alloc, d.partial, d.holds,
         p.nth
  FROM dirs d JOIN pick p ON d.host = p.host AND d.root = p.root AND d.scan = p.scan),
now_d AS (SELECT * FROM d WHERE nth = 1),
before_d AS (SELECT * FROM d WHERE nth = 2)
SELECT n.host, n.root_path AS root, n.path, n.depth, n.alloc,
       coalesce(b.alloc, 0) AS before_alloc, n.alloc - coalesce(b.alloc, 0) AS growth, n.holds
FROM now_d n
JOIN before_scan s ON s.host = n.host AND s.root = n.root
LEFT JOIN before_d b ON b.host = n.host AND b.root = n.root AND b.key = n.key
WHERE n.depth >= 1 AND n.depth <= s.depth_limit
  AND NOT n.partial AND NOT coalesce(b.partial, false)
  AND n.alloc - coalesce(b.alloc, 0) > 0
ORDER BY growth DESC, n.host, n.root, n.key
LIMIT {{top}}
""",
    # the latest risk mix of every host and root (allocated bytes, hard links once)
    "risk": f"""
WITH ranked AS ({_RANKED}),
latest AS (SELECT * FROM ranked WHERE nth = 1),
mix AS (
  SELECT host, root_path, root, 1 AS o, 'safe' AS risk, safe_alloc AS alloc FROM latest
  UNION ALL SELECT host, root_path, root, 2, 'caution', caution_alloc FROM latest
  UNION ALL SELECT host, root_path, root, 3, 'personal', personal_alloc FROM latest
  UNION ALL SELECT host, root_path, root, 4, 'high', high_alloc FROM latest
  UNION ALL SELECT host, root_path, root, 5, 'unknown', unknown_alloc FROM latest)
SELECT host, root_path AS root, risk, alloc FROM mix
ORDER BY host, root_path, root, o
""",
    # per host, what its latest scans hold that no one has modified for a year
    "stale": f"""
WITH ranked AS ({_RANKED}),
latest AS (SELECT * FROM ranked WHERE nth = 1)
SELECT host, count(*) AS roots, CAST(sum(stale_alloc) AS BIGINT) AS stale,
       CAST(sum(alloc) AS BIGINT) AS alloc
FROM latest GROUP BY host
ORDER BY stale DESC, host
""",
    # bytes by owner across hosts, from the latest scan of every host and root
    "owners": f"""
WITH ranked AS ({_RANKED}),
latest AS (SELECT host, root, scan FROM ranked WHERE nth = 1)
SELECT o.owner, o.host, CAST(sum(o.alloc) AS BIGINT) AS alloc,
       CAST(sum(o.files) AS BIGINT) AS files
FROM owners o JOIN latest l ON l.host = o.host AND l.root = o.root AND l.scan = o.scan
GROUP BY o.owner, o.host
ORDER BY alloc DESC, o.owner, o.host
""",
}

QUESTIONS = tuple(SQL)


def render_sql(question: str, *, since: int, top: int) -> str:
    """The SQL text of ``question`` with its parameters written in as integer literals."""
    return SQL[question].format(since=int(since), top=int(top))
