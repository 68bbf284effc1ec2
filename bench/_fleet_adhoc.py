"""One ad hoc fleet question that reads every snapshot row: ``_fleet_adhoc.py ENGINE DEST``.

The risk mix of the whole dataset, the snapshots joined to their verdicts on ``row_no`` (and the
partition), on DuckDB or Spark ``local[2]``. Started by ``bench.fleet`` through the trampoline;
prints one JSON object (the query's seconds, the rows) as its last line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

SQL = """SELECT c.risk, CAST(sum(s.alloc) AS BIGINT) AS alloc, count(*) AS n
FROM snapshots s JOIN classified c
  ON c.row_no = s.row_no AND c.host = s.host AND c.root = s.root AND c.scan = s.scan
GROUP BY c.risk ORDER BY c.risk"""


def main() -> None:
    engine, dest = sys.argv[1], Path(sys.argv[2])
    snaps = sorted(str(p) for p in (dest / "snapshots").rglob("part-0.parquet"))
    verdicts = sorted(str(p) for p in (dest / "classified").rglob("part-0.parquet"))
    started = time.perf_counter()
    if engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
        con.execute("SET memory_limit = '2GB'")
        con.execute(
            "CREATE VIEW snapshots AS SELECT host, root, scan, row_no, alloc "
            f"FROM read_parquet({snaps!r}, hive_partitioning = true)"
        )
        con.execute(
            "CREATE VIEW classified AS SELECT host, root, scan, row_no, risk "
            f"FROM read_parquet({verdicts!r}, hive_partitioning = true)"
        )
        rows = con.execute(SQL).fetchall()
    else:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        base = {t: str(dest / t) for t in ("snapshots", "classified")}
        reader = spark.read.option("basePath", base["snapshots"])
        reader.parquet(*snaps).createOrReplaceTempView("snapshots")
        reader = spark.read.option("basePath", base["classified"])
        reader.parquet(*verdicts).createOrReplaceTempView("classified")
        rows = [tuple(r) for r in spark.sql(SQL).collect()]
    took = time.perf_counter() - started
    print(json.dumps({"seconds": took, "rows": [list(r) for r in rows]}))


if __name__ == "__main__":
    main()
