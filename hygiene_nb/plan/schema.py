"""What a plan file is, apart from how one is built: its schema name, its digest, its codes.

The builder (``hygiene_nb.plan.document``) and the reader (``hygiene_nb.plan.reader``) both
hash a plan here, so the two cannot disagree on its bytes; the CLI reads the default lifetime
here; nothing here reads a snapshot, so
the executor, which only reads plans, loads no Parquet library.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from hygiene_nb.codes import texts_for

__all__ = ["DEFAULT_TTL", "EXCLUSIONS", "PLAN_SCHEMA", "canonical_json", "plan_digest"]

PLAN_SCHEMA = "hygiene-nb/plan@1"

DEFAULT_TTL = 1800  # seconds a plan is valid unless asked otherwise (`hygiene-nb plan --ttl`)

EXCLUSIONS = texts_for("plan")  # code → what it means and what to do (``codes``)


def canonical_json(obj: Any) -> bytes:
    """The one byte form a plan is hashed in: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def plan_digest(plan: Mapping[str, Any]) -> str:
    """``sha256:`` of the canonical JSON of the plan without its ``plan_digest``."""
    body = {k: v for k, v in plan.items() if k != "plan_digest"}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()
