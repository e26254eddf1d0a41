"""Turning a Spark failure during ingest into the user's error: which file, which line, which value.

When Spark's FAILFAST parse of a file fails (``FAILED_READ_FILE`` naming the file), the file is read again
permissively to find the first bad record, its line (or record) number and, for CSV, the column and value that do
not fit. A value that a checked cast (:mod:`spark_jobs.ingest.coerce`) refused is looked up in the JSON lines Spark
read to name its line (or record) as well.
"""
from __future__ import annotations

import csv
import json
import os
import re
from typing import Any, Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from spark_jobs.columns import type_ddl
from spark_jobs.errors import InputRejected, engine_check, failed_file, is_user_error, user_message
from spark_jobs.ingest.readers import SourceInfo

_CORRUPT = "__odf_corrupt_record"


def _find_line(path: str, raw: str, encoding: str) -> int | None:
    try:
        with open(path, encoding=encoding, errors="replace", newline="") as f:
            for n, line in enumerate(f, 1):
                if line.rstrip("\r\n") == raw:
                    return n
    except OSError:
        pass
    return None


def _first_corrupt_row(spark: SparkSession, src: SourceInfo) -> Any:
    schema = StructType(list(src.schema.fields) + [StructField(_CORRUPT, StringType())])
    opts = dict(src.options, mode="PERMISSIVE", columnNameOfCorruptRecord=_CORRUPT)
    read = spark.read.options(**opts).schema(schema)
    df = read.csv(src.spark_path) if src.fmt == "csv" else read.json(src.spark_path)
    rows = df.filter(F.col(_CORRUPT).isNotNull()).limit(1).collect()
    return rows[0] if rows else None


def _csv_detail(raw: str, row: Any, src: SourceInfo) -> str | None:
    sep = src.options.get("sep", ",")
    quote = src.options.get("quote", '"')
    kwargs: dict[str, Any] = {"delimiter": sep} if len(sep) == 1 else {}
    if quote in ("", "\u0000"):
        kwargs["quoting"] = csv.QUOTE_NONE
    else:
        kwargs["quotechar"] = quote
    esc = src.options.get("escape", "\\")
    if esc and esc != "\u0000":
        kwargs["escapechar"] = esc
    try:
        tokens = next(csv.reader([raw], **kwargs)) if len(sep) == 1 else raw.split(sep)
    except (csv.Error, StopIteration):
        return None
    fields = src.schema.fields
    if len(tokens) != len(fields):
        return f"expected {len(fields)} columns, found {len(tokens)}"
    null_value = src.options.get("nullValue", "")
    for f, tok in zip(fields, tokens):
        if row[f.name] is None and tok != null_value and tok != "":
            return f"value {tok!r} of column '{f.name}' does not fit type {type_ddl(f.dataType)}"
    return None


def diagnose_parse_failure(spark: SparkSession, src: SourceInfo, cause: str) -> InputRejected:
    """Re-read the failing file permissively to find the first bad record: its line/record number and value."""
    number, detail = None, None
    if src.fmt in ("csv", "json") and src.schema is not None:
        try:
            row = _first_corrupt_row(spark, src)
            if row is not None:
                raw = row[_CORRUPT]
                number = _find_line(src.spark_path, raw, src.encoding)
                if src.fmt == "csv":
                    detail = _csv_detail(raw, row, src)
                else:
                    try:
                        json.loads(raw)
                    except ValueError as e:
                        detail = f"invalid JSON: {e}"
        except Exception:  # noqa: BLE001 - diagnosis is best effort; the cause alone is still a good message
            pass
    where = f"{src.numbering} {number}: " if number is not None else ""
    kw = {src.numbering: number} if number is not None else {}
    return InputRejected(f"cannot read {src.display_path}: {where}{detail or cause}", file=src.display_path, **kw)


_CAST_CHECK = re.compile(
    r"cannot read (?P<file>.+?): column '(?P<col>.+?)': value '(?P<value>.*)' is not a valid (?P<type>.+)", re.DOTALL)


def _as_text(value: Any) -> str:
    """A JSON value as Spark reads it into a STRING column: text as is, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def locate_cast_failure(check: str, sources: Sequence[SourceInfo]) -> InputRejected | None:
    """The line (or record) of a JSON source whose value a checked cast refused; None when it cannot be found."""
    m = _CAST_CHECK.fullmatch(check)
    src = next((s for s in sources if m and s.display_path == m["file"] and s.fmt == "json"), None)
    if src is None:
        return None
    try:
        with open(src.spark_path, encoding=src.encoding, errors="replace") as f:
            for n, line in enumerate(f, 1):
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get(m["col"]) is not None and _as_text(rec[m["col"]]) == m["value"]:
                    return InputRejected(f"cannot read {m['file']}: {src.numbering} {n}: column '{m['col']}': value "
                                         f"'{m['value']}' is not a valid {m['type']}", file=m["file"],
                                         **{src.numbering: n})
    except OSError:
        pass
    return None


def explain_failure(spark: SparkSession, exc: BaseException, sources: Sequence[SourceInfo]) -> InputRejected | None:
    """A Spark failure caused by the data or the user's SQL -> InputRejected; anything else -> None (internal)."""
    check = engine_check(exc)
    if check is not None:
        return locate_cast_failure(check, sources) or InputRejected(check)
    failing = failed_file(exc)
    if failing is not None:
        for src in sources:
            if os.path.normpath(os.path.abspath(src.spark_path)) == os.path.normpath(failing):
                return diagnose_parse_failure(spark, src, user_message(exc))
    if is_user_error(exc):
        single = sources[0].display_path if len(sources) == 1 else None
        prefix = f"cannot read {single}: " if single else ""
        return InputRejected(prefix + user_message(exc), file=single)
    return None
