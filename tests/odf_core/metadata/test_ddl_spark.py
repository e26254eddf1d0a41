"""The pure-Python DDL check agrees with Spark's own parser (``StructType.fromDDL``, what the ingest job calls on a
read schema) on every case of test_ddl.py, and the cases where it is stricter are mistakes Spark punishes later."""
from __future__ import annotations

import pytest

from .test_ddl import ACCEPTED, REJECTED, STRICTER

pytestmark = pytest.mark.spark


def spark_columns(ddl: str) -> str | None:
    """Spark's reading of a column list, or None when it refuses it (a bare type is not a column list either)."""
    from pyspark.sql.types import StructType

    try:
        parsed = StructType.fromDDL(ddl)
    except Exception:  # noqa: BLE001 - Spark refusing the DDL, whatever its error type
        return None
    return parsed.simpleString() if isinstance(parsed, StructType) else None


def test_spark_reads_every_accepted_case_the_same(spark):
    disagree = [(ddl, spark_columns(ddl), ours) for ddl, ours in ACCEPTED
                if (spark_columns(ddl) or "").lower() != ours.lower()]
    assert disagree == []


def test_spark_refuses_every_rejected_case(spark):
    assert [(ddl, spark_columns(ddl)) for ddl, _ in REJECTED if spark_columns(ddl) is not None] == []


def test_what_the_check_refuses_beyond_spark_would_go_wrong_later(spark, tmp_path):
    for ddl, _ in STRICTER:
        assert spark_columns(ddl) is not None  # the parser alone takes it ...
    # ... but the job joins the entries into one line, where a '--' comment swallows the next columns and an empty
    # entry leaves a dangling comma
    assert spark_columns(", ".join(["a INT -- note", "b STRING"])) == "struct<a:int>"
    assert spark_columns(", ".join(["a INT", ""])) is None
    # and a name repeated across entries is refused when the data is read
    (tmp_path / "x.csv").write_text("1,2\n")
    with pytest.raises(Exception, match="COLUMN_ALREADY_EXISTS"):
        spark.read.schema("a INT, a INT").csv(str(tmp_path / "x.csv")).collect()
