"""Spark DDL column lists — the strings of a ReadStep's ``schema`` — checked in pure Python.

Why: a misspelled type (``city STRANG``) used to pass ``odf add`` and the DAG factory and only fail at the first pull,
inside a Spark job. Adding snapshots and parsing DAG files start no JVM, so the check is a small parser of the same
language Spark's own one accepts there: the ingest job joins the entries with ``", "`` and calls
``StructType.fromDDL``, which takes ``name TYPE [NOT NULL] [COMMENT 'text']`` columns (also ``name: TYPE``). A spark
test feeds the same strings to Spark and both must agree.

One extension of Spark's language, for schemas written for the reference implementation (whose DDL is generic SQL):
a column name may be a double-quoted identifier (``"City Name" STRING``); :func:`spark_ddl` rewrites such names into
Spark's backticks before the engine parses the text.

Stricter than Spark's parser, on purpose (each would only fail later, or silently do something else):

* a ``--`` comment: the entries are joined into one line, so it would swallow every column after it;
* an empty entry: joined, it leaves a dangling comma;
* an empty or duplicate column name (names are case-sensitive, as ingest resolves them): the readers refuse it when
  the job runs;
* an entry that is a bare type (``INT``): Spark's parser reads it as a type, not as a column.

Not checked: whether a ``COLLATE`` name exists (Spark's list depends on its ICU locales).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Sequence

__all__ = ["Column", "DdlError", "not_null_columns", "parse_columns", "schema_problems", "spark_ddl", "TYPE_NAMES"]

# Type names (and synonyms) → Spark's spelling in ``DataType.simpleString()``.
_SIMPLE = {
    "BOOLEAN": "boolean", "TINYINT": "tinyint", "BYTE": "tinyint", "SMALLINT": "smallint", "SHORT": "smallint",
    "INT": "int", "INTEGER": "int", "BIGINT": "bigint", "LONG": "bigint", "FLOAT": "float", "REAL": "float",
    "DOUBLE": "double", "STRING": "string", "BINARY": "binary", "DATE": "date", "TIMESTAMP_NTZ": "timestamp_ntz",
    "TIMESTAMP_LTZ": "timestamp", "VOID": "void", "VARIANT": "variant",
}
_DECIMAL = ("DECIMAL", "DEC", "NUMERIC")
_LENGTH = {"CHAR": "char", "CHARACTER": "char", "VARCHAR": "varchar"}
_COMPLEX = ("ARRAY", "MAP", "STRUCT")
TYPE_NAMES = (*_SIMPLE, *_DECIMAL, *_LENGTH, "TIMESTAMP", "TIME", "INTERVAL", *_COMPLEX)
_HINTS = {  # types people write from other SQL dialects (or the ODF spec's table) that Spark does not know
    "UUID": "Spark has no UUID type: use STRING", "TEXT": "use STRING", "BOOL": "use BOOLEAN",
    "DATETIME": "use TIMESTAMP", "NUMBER": "use DECIMAL(p,s)", "JSON": "use STRING or VARIANT",
}
_YEAR_MONTH = ("YEAR", "MONTH")
_DAY_TIME = ("DAY", "HOUR", "MINUTE", "SECOND")
_MAX_DECIMAL = 38
_MAX_INT = 2**31 - 1
# Words Spark's lexer reads as numbers, not names (1L, 2d, 1e5, 3bd ...).
_NUMERIC = re.compile(r"\d+(?:[LSY]|BD|D|F)?|\d+E\d+(?:BD|D|F)?", re.IGNORECASE)


class DdlError(ValueError):
    """A column list Spark would refuse; ``position`` is the 0-based offset in the text."""

    def __init__(self, problem: str, position: int):
        self.problem, self.position = problem, position
        super().__init__(f"{problem} (at character {position + 1})")


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # as Spark's DataType.simpleString() spells it, e.g. "decimal(10,2)", "array<struct<a:int>>"
    not_null: bool = False
    comment: str | None = None


@dataclass(frozen=True)
class _Tok:
    kind: str  # "word" | "quoted" (`name`) | "string" | one of  < > ( ) , : .
    text: str  # words upper-cased for keyword matching keep their spelling in ``raw``
    raw: str
    pos: int


_PUNCT = "<>(),:."


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("--", i):
            raise DdlError("'--' comments are not allowed: the schema entries are joined into one line, so it "
                           "would swallow the columns after it (use /* ... */)", i)
        elif text.startswith("/*", i):
            i = _skip_block_comment(text, i)
        elif c in _PUNCT:
            out.append(_Tok(c, c, c, i))
            i += 1
        elif c == "`":
            j, name = i + 1, []
            while True:
                k = text.find("`", j)
                if k < 0:
                    raise DdlError("unterminated `quoted name`", i)
                name.append(text[j:k])
                if text.startswith("``", k):
                    name.append("`")
                    j = k + 2
                    continue
                break
            out.append(_Tok("quoted", "".join(name), text[i:k + 1], i))
            i = k + 1
        elif c in "'\"" or (c in "rR" and i + 1 < n and text[i + 1] in "'\""):
            value, j = _string(text, i)
            out.append(_Tok("string", value, text[i:j], i))
            i = j
        elif c.isascii() and (c.isalnum() or c == "_"):
            j = i
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            out.append(_Tok("word", text[i:j].upper(), text[i:j], i))
            i = j
        else:
            in_name = not c.isascii() or (c in "-.$" and i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"))
            hint = " (quote names with other characters in backticks: `my-col`)" if in_name else ""
            raise DdlError(f"unexpected character {c!r}{hint}", i)
    return out


def _skip_block_comment(text: str, i: int) -> int:
    depth, j = 0, i
    while j < len(text):
        if text.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif text.startswith("*/", j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                return j
        else:
            j += 1
    raise DdlError("unterminated /* comment", i)


def _string(text: str, i: int) -> tuple[str, int]:
    raw = text[i] in "rR"
    start = i + 1 if raw else i
    q = text[start]
    j, out = start + 1, []
    while j < len(text):
        c = text[j]
        if c == q:
            if not raw and text.startswith(q * 2, j):
                out.append(q)
                j += 2
                continue
            return "".join(out), j + 1
        if c == "\\" and not raw:
            if j + 1 >= len(text):
                break
            out.append(text[j + 1])
            j += 2
            continue
        out.append(c)
        j += 1
    raise DdlError("unterminated string", i)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.double_quoted: list[_Tok] = []  # names written as "identifiers" (rewritten by spark_ddl)

    # -- helpers ---------------------------------------------------------------------------------------------------

    def peek(self, offset: int = 0) -> _Tok | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def at(self, *texts: str) -> bool:
        t = self.peek()
        return t is not None and t.kind in ("word", *_PUNCT) and t.text in texts

    def where(self) -> int:
        t = self.peek()
        return t.pos if t else len(self.text.rstrip())

    def fail(self, problem: str) -> DdlError:
        t = self.peek()
        got = f", found {t.raw!r}" if t else ", found the end of the text"
        return DdlError(problem + got, self.where())

    def expect(self, text: str, what: str | None = None) -> _Tok:
        if not self.at(text):
            raise self.fail(f"expected {what or repr(text)}")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def number(self, what: str) -> int:
        t = self.peek()
        if t is None or t.kind != "word" or not t.text.isdigit():
            raise self.fail(f"expected {what} (a whole number)")
        self.i += 1
        value = int(t.text)
        if value > _MAX_INT:
            raise DdlError(f"{what} {t.raw} is too large", t.pos)
        return value

    def params(self) -> list[tuple[int, int]]:
        """``(n, m, ...)`` after a type name: (value, position) pairs."""
        out: list[tuple[int, int]] = []
        if self.accept("("):
            while True:
                pos = self.where()
                out.append((self.number("a type parameter"), pos))
                if not self.accept(","):
                    break
            self.expect(")", "')'")
        return out

    # -- grammar ---------------------------------------------------------------------------------------------------

    def columns(self) -> list[Column]:
        if self.peek() is None:
            raise DdlError("empty column definition: expected 'name TYPE'", 0)
        cols = [self.column(top=True)]
        while self.accept(","):
            cols.append(self.column(top=True))
        if self.peek() is not None:
            raise self.fail("expected ',' before the next column")
        return cols

    def column(self, top: bool) -> Column:
        t = self.peek()
        if t is None:
            raise self.fail("expected a column name")
        if t.kind == "quoted":
            name = t.text
        elif t.kind == "string" and t.raw.startswith('"'):
            name = t.text
            self.double_quoted.append(t)
        elif t.kind == "word":
            if _NUMERIC.fullmatch(t.raw):
                raise DdlError(f"{t.raw!r} is a number, not a name (quote it in backticks)", t.pos)
            name = t.raw
        else:
            raise self.fail("expected a column name")
        self.i += 1
        nxt = self.peek()
        if top and t.kind == "word" and t.text in TYPE_NAMES and (nxt is None or nxt.text in ("(", "<")):
            raise DdlError("a bare type is not a column: expected 'name TYPE'", t.pos)
        if nxt is None:
            raise DdlError(f"expected a type after the name {t.raw!r}", len(self.text.rstrip()))
        if nxt.kind == ".":
            raise DdlError(f"a name with '.' must be quoted in backticks: `{t.raw}.…`", t.pos)
        self.accept(":")
        typ = self.type()
        not_null = False
        if self.accept("NOT"):
            self.expect("NULL", "NULL after NOT")
            not_null = True
        comment = None
        if self.accept("COMMENT"):
            s = self.peek()
            if s is None or s.kind != "string":
                raise self.fail("expected a quoted comment after COMMENT")
            parts = []
            while (s := self.peek()) is not None and s.kind == "string":
                parts.append(s.text)
                self.i += 1
            comment = "".join(parts)
        if self.at("NOT", "NULL", "COMMENT", "DEFAULT", "COLLATE"):
            t = self.peek()
            assert t is not None  # at() matched it
            problem = {"COLLATE": "COLLATE only follows STRING, CHAR or VARCHAR",
                       "DEFAULT": "DEFAULT values are not part of a read schema",
                       "NULL": "columns are nullable unless NOT NULL is written"}.get(
                t.text, "the order is: name TYPE [NOT NULL] [COMMENT 'text']")
            raise DdlError(f"unexpected {t.raw!r}: {problem}", t.pos)
        return Column(name, typ, not_null, comment)

    def type(self) -> str:
        t = self.peek()
        if t is None or t.kind != "word":
            raise self.fail("expected a type")
        name = t.text
        self.i += 1
        if name == "ARRAY":
            self.open_angle(name)
            inner = self.type()
            self.close_angle(name)
            return f"array<{inner}>"
        if name == "MAP":
            self.open_angle(name)
            key = self.type()
            self.expect(",", "',' between the key and value types of MAP")
            value = self.type()
            self.close_angle(name)
            return f"map<{key},{value}>"
        if name == "STRUCT":
            self.open_angle(name)
            fields = []
            if not self.at(">"):
                fields.append(self.column(top=False))
                while self.accept(","):
                    fields.append(self.column(top=False))
            self.close_angle(name)
            return "struct<" + ",".join(f"{f.name}:{f.type}" for f in fields) + ">"
        if name == "INTERVAL":
            return self.interval()
        if name == "TIME":
            params = self.params()
            self.without_time_zone()
            if len(params) > 1:
                raise DdlError("TIME takes one parameter, the fractional seconds precision", params[1][1])
            p = params[0][0] if params else 6
            if p > 6:
                raise DdlError(f"TIME precision {p} is out of range 0 to 6", params[0][1])
            return f"time({p})"
        if name == "TIMESTAMP":
            self.no_params(name, "Spark timestamps have no precision: use TIMESTAMP")
            if self.at("WITH") and (n := self.peek(1)) is not None and n.text == "LOCAL":
                self.i += 2
                self.expect("TIME")
                self.expect("ZONE")
                return "timestamp"
            return "timestamp_ntz" if self.without_time_zone() else "timestamp"
        if name in _DECIMAL:
            params = self.params()
            if len(params) > 2:
                raise DdlError(f"{t.raw} takes at most two parameters (precision, scale)", params[2][1])
            p = params[0][0] if params else 10
            s = params[1][0] if len(params) > 1 else 0
            if p > _MAX_DECIMAL:
                raise DdlError(f"decimal precision {p} exceeds the maximum {_MAX_DECIMAL}", params[0][1])
            if s > p:
                raise DdlError(f"decimal scale {s} is larger than its precision {p}", params[1][1])
            return f"decimal({p},{s})"
        if name in _LENGTH:
            params = self.params()
            if len(params) != 1:
                raise DdlError(f"{t.raw} needs exactly one length, e.g. {t.raw.upper()}(10)", t.pos)
            self.collate()
            return f"{_LENGTH[name]}({params[0][0]})"
        if name in _SIMPLE:
            self.no_params(t.raw)
            collation = self.collate() if name == "STRING" else None
            return f"string collate {collation}" if collation else _SIMPLE[name]
        close = difflib.get_close_matches(name, TYPE_NAMES, n=1, cutoff=0.6)
        hint = _HINTS.get(name) or (f"did you mean {close[0]}?" if close else
                                    "expected a Spark SQL type: " + ", ".join(TYPE_NAMES))
        raise DdlError(f"unknown type {t.raw!r} ({hint})", t.pos)

    def open_angle(self, name: str) -> None:
        if not self.at("<"):
            raise self.fail(f"{name} needs its element type{'s' if name != 'ARRAY' else ''} in <...>")
        self.i += 1

    def close_angle(self, name: str) -> None:
        self.expect(">", f"'>' closing {name}<...>")

    def no_params(self, name: str, hint: str = "") -> None:
        if self.at("("):
            raise DdlError(f"{name} takes no parameters" + (f" ({hint})" if hint else ""), self.where())

    def without_time_zone(self) -> bool:
        if not self.accept("WITHOUT"):
            if self.at("WITH"):
                raise self.fail("only WITHOUT TIME ZONE (or TIMESTAMP WITH LOCAL TIME ZONE) is supported")
            return False
        self.expect("TIME", "TIME ZONE after WITHOUT")
        self.expect("ZONE", "ZONE after WITHOUT TIME")
        return True

    def collate(self) -> str | None:
        if not self.accept("COLLATE"):
            return None
        parts = [self.collation_part()]
        while self.accept("."):
            parts.append(self.collation_part())
        name = parts[-1]
        return None if name.upper() == "UTF8_BINARY" else name

    def collation_part(self) -> str:
        t = self.peek()
        if t is None or t.kind not in ("word", "quoted"):
            raise self.fail("expected a collation name after COLLATE")
        self.i += 1
        return t.text if t.kind == "quoted" else t.raw

    def interval(self) -> str:
        t = self.peek()
        if t is None or t.kind != "word" or t.text not in (*_YEAR_MONTH, *_DAY_TIME):
            return "interval"
        self.i += 1
        start = t.text
        family = _YEAR_MONTH if start in _YEAR_MONTH else _DAY_TIME
        if not self.accept("TO"):
            return f"interval {start.lower()}"
        end = self.peek()
        if end is None or end.kind != "word" or end.text not in family or family.index(end.text) <= family.index(
                start):
            later = ", ".join(family[family.index(start) + 1:]) or "nothing (it is the last unit)"
            raise self.fail(f"INTERVAL {start} TO needs a later unit of the same kind: {later}")
        self.i += 1
        return f"interval {start.lower()} to {end.text.lower()}"


def parse_columns(text: str) -> list[Column]:
    """The columns of one DDL column list (``"a INT, b STRUCT<c: STRING>"``); raises :class:`DdlError`."""
    return _Parser(text).columns()


def spark_ddl(text: str) -> str:
    """``text`` with double-quoted column names rewritten as Spark's backtick-quoted ones (``"a b" INT`` ->
    ```a b` INT``); text without double quotes, or that does not parse, is returned as it is (Spark reports)."""
    if '"' not in text:
        return text
    parser = _Parser(text)
    try:
        parser.columns()
    except DdlError:
        return text
    out, last = [], 0
    for tok in parser.double_quoted:
        out.append(text[last:tok.pos])
        out.append("`" + tok.text.replace("`", "``") + "`")
        last = tok.pos + len(tok.raw)
    return "".join(out) + text[last:]


def not_null_columns(entries: Sequence[str] | None) -> tuple[str, ...]:
    """The top-level columns a read schema declares NOT NULL (none when it has no schema or does not parse)."""
    out: list[str] = []
    for entry in entries or ():
        try:
            out += [c.name for c in parse_columns(entry) if c.not_null]
        except DdlError:
            return ()
    return tuple(out)


def schema_problems(entries: Sequence[str]) -> list[tuple[int, str]]:
    """``(entry index, problem)`` for each entry of a ReadStep ``schema`` that Spark would refuse or that repeats a
    column name of an earlier entry; empty when the schema is fine."""
    problems: list[tuple[int, str]] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        try:
            cols = parse_columns(entry)
        except DdlError as e:
            problems.append((i, str(e)))
            continue
        for c in cols:
            if not c.name:
                problems.append((i, "a column name must not be empty"))
            elif c.name in seen:
                problems.append((i, f"duplicate column name {c.name!r}"))
            seen.add(c.name)
    return problems
