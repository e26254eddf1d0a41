"""The pure-Python check of Spark DDL column lists. The case lists are shared with test_ddl_spark.py, which feeds
the same strings to Spark's own parser: both must agree on every one of them."""
from __future__ import annotations

import pytest

from odf_core.metadata.ddl import DdlError, not_null_columns, parse_columns, schema_problems, spark_ddl

# (DDL, the columns as Spark's StructType.simpleString() spells them)
ACCEPTED = [
    ("a INT", "struct<a:int>"),
    ("a int, b string", "struct<a:int,b:string>"),
    ("A Boolean", "struct<A:boolean>"),
    ("a: int, b string", "struct<a:int,b:string>"),
    ("a TINYINT, b BYTE, c SMALLINT, d SHORT, e INTEGER, f LONG, g BIGINT",
     "struct<a:tinyint,b:tinyint,c:smallint,d:smallint,e:int,f:bigint,g:bigint>"),
    ("a FLOAT, b REAL, c DOUBLE", "struct<a:float,b:float,c:double>"),
    ("a DECIMAL, b DEC(5), c NUMERIC(38,38), d DECIMAL( 5 , 2 ), e DECIMAL(0)",
     "struct<a:decimal(10,0),b:decimal(5,0),c:decimal(38,38),d:decimal(5,2),e:decimal(0,0)>"),
    ("a STRING, b VARCHAR(10), c CHAR(3), d CHARACTER(1), e CHAR(0)",
     "struct<a:string,b:varchar(10),c:char(3),d:char(1),e:char(0)>"),
    ("a BINARY, b DATE, c TIMESTAMP, d TIMESTAMP_NTZ, e TIMESTAMP_LTZ",
     "struct<a:binary,b:date,c:timestamp,d:timestamp_ntz,e:timestamp>"),
    ("a TIMESTAMP WITHOUT TIME ZONE, b TIMESTAMP WITH LOCAL TIME ZONE", "struct<a:timestamp_ntz,b:timestamp>"),
    ("a TIME, b TIME(0), c TIME(3) WITHOUT TIME ZONE", "struct<a:time(6),b:time(0),c:time(3)>"),
    ("a INTERVAL, b INTERVAL YEAR, c INTERVAL year to month, d INTERVAL MONTH",
     "struct<a:interval,b:interval year,c:interval year to month,d:interval month>"),
    ("a INTERVAL DAY TO SECOND, b INTERVAL HOUR TO MINUTE, c INTERVAL MINUTE TO SECOND, d INTERVAL SECOND",
     "struct<a:interval day to second,b:interval hour to minute,c:interval minute to second,d:interval second>"),
    ("a ARRAY<INT>, b Array < string >, c ARRAY<ARRAY<ARRAY<INT>>>",
     "struct<a:array<int>,b:array<string>,c:array<array<array<int>>>>"),
    ("a MAP<STRING, INT>, b MAP<ARRAY<INT>,STRING>", "struct<a:map<string,int>,b:map<array<int>,string>>"),
    ("a STRUCT<>, b STRUCT< >, c STRUCT<x: INT, y STRING>, d STRUCT<x:STRUCT<y:INT>>",
     "struct<a:struct<>,b:struct<>,c:struct<x:int,y:string>,d:struct<x:struct<y:int>>>"),
    ("a ARRAY<STRUCT<`x y`: MAP<INT, ARRAY<DECIMAL(3,1)>>>>",
     "struct<a:array<struct<x y:map<int,array<decimal(3,1)>>>>>"),
    ("a STRUCT<x INT NOT NULL COMMENT 'c', `y`: STRING COMMENT 'd'>", "struct<a:struct<x:int,y:string>>"),
    ("a VOID, b VARIANT NOT NULL", "struct<a:void,b:variant>"),
    ("a STRING COLLATE UNICODE_CI, b STRING COLLATE UTF8_BINARY, c ARRAY<STRING COLLATE UNICODE_CI>",
     "struct<a:string collate UNICODE_CI,b:string,c:array<string collate UNICODE_CI>>"),
    ("a CHAR(3) COLLATE UNICODE_CI, b STRING COLLATE system.builtin.UNICODE",
     "struct<a:char(3),b:string collate UNICODE>"),
    ("a INT NOT NULL, b INT NOT   NULL COMMENT 'hi', c LONG NOT NULL", "struct<a:int,b:int,c:bigint>"),
    ("a INT COMMENT \"dq\", b INT COMMENT 'it''s', c INT COMMENT 'it\\'s', d INT COMMENT 'x' 'y'",
     "struct<a:int,b:int,c:int,d:int>"),
    ("a INT COMMENT r'x\\', b INT COMMENT ''", "struct<a:int,b:int>"),
    ("`a b` INT, `a``b` INT, _x INT, 1abc INT, 1e INT, 0x1 INT, a1 INT",
     "struct<a b:int,a`b:int,_x:int,1abc:int,1e:int,0x1:int,a1:int>"),
    ("select INT, from STRING, not INT, null INT, comment INT, struct INT, interval INT, map INT",
     "struct<select:int,from:string,not:int,null:int,comment:int,struct:int,interval:int,map:int>"),
    ("a /* c */ INT, b INT /* x */ /* y */, c /* a /* nested */ */ INT", "struct<a:int,b:int,c:int>"),
    ("  a\tINT  ", "struct<a:int>"),
    ("a ARRAY<INT> NOT NULL, b MAP<INT, INT> COMMENT 'c', c struct<a int> not null",
     "struct<a:array<int>,b:map<int,int>,c:struct<a:int>>"),
    ("a CHAR(2147483647)", "struct<a:char(2147483647)>"),
]

# (DDL, a fragment of our message)
REJECTED = [
    ("a STRANG", "unknown type 'STRANG' (did you mean STRING?)"),
    ("a UUID", "Spark has no UUID type"),
    ("a GEOMETRY", "unknown type 'GEOMETRY'"),
    ("a DATETIME", "use TIMESTAMP"),
    ("a BOOL", "use BOOLEAN"),
    ("a TEXT", "use STRING"),
    ("a DOUBLE PRECISION", "expected ',' before the next column, found 'PRECISION'"),
    ("INT", "a bare type is not a column"),
    ("a", "expected a type after the name 'a'"),
    ("a INT,", "expected a column name, found the end of the text"),
    (",a INT", "expected a column name, found ','"),
    ("a INT b INT", "expected ',' before the next column, found 'b'"),
    ("a INT;", "unexpected character ';'"),
    ("a INT NULL", "columns are nullable unless NOT NULL is written"),
    ("a INT NOT", "expected NULL after NOT"),
    ("a INT COMMENT 'hi' NOT NULL", "the order is: name TYPE [NOT NULL] [COMMENT 'text']"),
    ("a INT NOT NULL NOT NULL", "the order is"),
    ("a int COMMENT 'x' COMMENT 'y'", "the order is"),
    ("a INT COMMENT", "expected a quoted comment after COMMENT"),
    ("a INT COMMENT 1", "expected a quoted comment after COMMENT, found '1'"),
    ("a INT COMMENT 'unterminated", "unterminated string"),
    ("a INT COMMENT 'x\\'", "unterminated string"),
    ("a INT COMMENT 'x' || 'y'", "unexpected character '|'"),
    ("a INT DEFAULT 1", "DEFAULT values are not part of a read schema"),
    ("a /* unterminated INT", "unterminated /* comment"),
    ("123 INT", "'123' is a number, not a name"),
    ("1d INT", "'1d' is a number"),
    ("1L INT", "'1L' is a number"),
    ("1e5 INT", "'1e5' is a number"),
    ("1bd INT", "'1bd' is a number"),
    ("a STRUCT<1d INT>", "'1d' is a number"),
    ("a-b INT", "quote names with other characters in backticks"),
    ("a.b INT", "a name with '.' must be quoted in backticks"),
    ("città INT", "unexpected character 'à'"),
    ("$a INT", "unexpected character '$'"),
    ("a `INT`", "expected a type, found '`INT`'"),
    ("a INT(5)", "INT takes no parameters"),
    ("a STRING(5)", "STRING takes no parameters"),
    ("a FLOAT(5)", "FLOAT takes no parameters"),
    ("a BINARY(4)", "BINARY takes no parameters"),
    ("a TIMESTAMP(3)", "Spark timestamps have no precision"),
    ("a TIMESTAMP_NTZ(3)", "TIMESTAMP_NTZ takes no parameters"),
    ("a TIMESTAMP WITH TIME ZONE", "only WITHOUT TIME ZONE"),
    ("a TIMESTAMP_NTZ WITHOUT TIME ZONE", "expected ',' before the next column, found 'WITHOUT'"),
    ("a TIME(7)", "TIME precision 7 is out of range 0 to 6"),
    ("a TIME()", "expected a type parameter"),
    ("a TIME WITH TIME ZONE", "only WITHOUT TIME ZONE"),
    ("a DECIMAL(39)", "decimal precision 39 exceeds the maximum 38"),
    ("a DECIMAL(5,6)", "decimal scale 6 is larger than its precision 5"),
    ("a DECIMAL(5,2,1)", "at most two parameters"),
    ("a DECIMAL()", "expected a type parameter (a whole number), found ')'"),
    ("a DECIMAL(,)", "expected a type parameter"),
    ("a DECIMAL(5.2)", "expected ')', found '.'"),
    ("a DECIMAL(-1)", "unexpected character '-'"),
    ("a DECIMAL(2147483648)", "type parameter 2147483648 is too large"),
    ("a CHAR(+3)", "unexpected character '+'"),
    ("a VARCHAR", "VARCHAR needs exactly one length"),
    ("a VARCHAR(3, 4)", "VARCHAR needs exactly one length"),
    ("a CHAR", "CHAR needs exactly one length"),
    ("a CHAR VARYING(3)", "CHAR needs exactly one length"),
    ("a INTERVAL MONTH TO YEAR", "INTERVAL MONTH TO needs a later unit of the same kind"),
    ("a INTERVAL DAY TO DAY", "INTERVAL DAY TO needs a later unit of the same kind: HOUR, MINUTE, SECOND"),
    ("a INTERVAL YEAR TO SECOND", "INTERVAL YEAR TO needs a later unit of the same kind: MONTH"),
    ("a INTERVAL YEAR(2)", "expected ',' before the next column, found '('"),
    ("a ARRAY", "ARRAY needs its element type in <...>"),
    ("a ARRAY<>", "expected a type, found '>'"),
    ("a ARRAY<INT,INT>", "expected '>' closing ARRAY<...>, found ','"),
    ("a ARRAY<INT NOT NULL>", "expected '>' closing ARRAY<...>, found 'NOT'"),
    ("a ARRAY<INT>>", "expected ',' before the next column, found '>'"),
    ("a MAP", "MAP needs its element types in <...>"),
    ("a MAP<>", "expected a type, found '>'"),
    ("a MAP<STRING>", "expected ',' between the key and value types of MAP"),
    ("a MAP<STRING, INT NOT NULL>", "expected '>' closing MAP<...>, found 'NOT'"),
    ("a STRUCT", "STRUCT needs its element types in <...>"),
    ("a STRUCT<x>", "expected a type, found '>'"),
    ("a STRUCT<x INT,>", "expected a column name, found '>'"),
    ("a STRUCT<x INT", "expected '>' closing STRUCT<...>"),
    ("a STRUCT<x: INT COMMENT 'c' NOT NULL>", "the order is"),
    ("a STRING COLLATE 'UNICODE'", "expected a collation name after COLLATE"),
    ("a INT COLLATE UNICODE_CI", "COLLATE only follows STRING, CHAR or VARCHAR"),
    ("a STRING NOT NULL COLLATE UNICODE_CI", "COLLATE only follows STRING, CHAR or VARCHAR"),
]

# Spark's parser takes these; the check refuses them on purpose (see the module docs of odf_core.metadata.ddl).
STRICTER = [
    ("", "empty column definition"),
    ("a INT -- comment", "'--' comments are not allowed"),
    ("a DOUBLE NOT NULL COMMENT 'x' -- trailing", "'--' comments are not allowed"),
]


@pytest.mark.parametrize("ddl,spark", ACCEPTED)
def test_accepted_column_lists_read_as_spark_reads_them(ddl, spark):
    cols = parse_columns(ddl)
    assert "struct<" + ",".join(f"{c.name}:{c.type}" for c in cols) + ">" == spark


@pytest.mark.parametrize("ddl,fragment", REJECTED + STRICTER)
def test_rejected_column_lists_say_what_and_where(ddl, fragment):
    with pytest.raises(DdlError) as ei:
        parse_columns(ddl)
    assert fragment in str(ei.value)
    assert 0 <= ei.value.position <= len(ddl)


def test_not_null_and_comments_are_kept():
    (c,) = parse_columns("`my col` DECIMAL(10,2) NOT NULL COMMENT 'price' ' in EUR'")
    assert (c.name, c.type, c.not_null, c.comment) == ("my col", "decimal(10,2)", True, "price in EUR")


def test_schema_problems_name_the_entry_and_catch_names_repeated_across_entries():
    assert schema_problems(["a INT", "b STRING, c DATE"]) == []
    problems = schema_problems(["a INT", "b STRANG", "a BIGINT", "`` INT", "c INT -- note"])
    assert [i for i, _ in problems] == [1, 2, 3, 4]
    assert "unknown type 'STRANG'" in problems[0][1] and "(at character 3)" in problems[0][1]
    assert problems[1][1] == "duplicate column name 'a'"
    assert problems[2][1] == "a column name must not be empty"
    assert "'--' comments are not allowed" in problems[3][1]


def test_names_differing_only_in_case_are_different_columns():
    # ingest resolves column names case-sensitively (docs/conformance.md)
    assert schema_problems(["a INT", "A BIGINT"]) == []


def test_double_quoted_names_are_identifiers_rewritten_for_spark():
    assert [c.name for c in parse_columns('"City Name" STRING, "Date (UTC)" DATE NOT NULL')] == \
        ["City Name", "Date (UTC)"]
    assert spark_ddl('"City Name" STRING, "a`b" INT') == "`City Name` STRING, `a``b` INT"
    assert spark_ddl("a STRING COMMENT \"x\"") == "a STRING COMMENT \"x\""  # a double-quoted comment stays text
    assert not_null_columns(['"a b" INT NOT NULL', "c STRING", "d DATE NOT NULL"]) == ("a b", "d")
