"""``meta``: the generation's key/value settings and identity, each value JSON."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

DDL_META = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
)"""


def get_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def set_meta(conn: sqlite3.Connection, values: Mapping[str, Any]) -> None:
    conn.executemany(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [(k, json.dumps(v, sort_keys=True)) for k, v in values.items()],
    )


def meta_value(conn: sqlite3.Connection, key: str) -> Any:
    """The value of one key (``None`` when the key is absent), without reading the others."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return json.loads(row[0]) if row else None
