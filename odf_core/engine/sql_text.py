"""SQL text as both sides of the engine boundary read it, without Spark: tokens (strings, quoted names and comments
kept whole), the statements of a text, its first word, and whether it is a query at all.

Whether a text is a query is only the client's friendly check (``odf add`` names the file and line of a step that is
not; ``odf sql`` answers before asking the engine): the engine's own gate (``spark_jobs/sql_gate.py``) parses every
statement and decides what runs. Spark's grammar (``SqlBaseParser.g4``: ``query : ctes? queryTerm
queryOrganization``) starts a query, after comments, whitespace and opening parentheses, with ``SELECT``, ``WITH``
(common table expressions), ``VALUES`` (an inline table), ``FROM`` (``FROM t SELECT ...`` and the ``FROM t |> ...``
pipe syntax) or ``TABLE t``. ``MAP`` and ``REDUCE`` (Hive script transforms, which run programs) also start one in
Spark's grammar; they are refused.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

QUERY_STARTS = ("select", "with", "values", "from", "table")


@dataclass(frozen=True)
class Token:
    """A piece of SQL text: ``word`` (letters, digits, ``_ . -``), ``quoted`` (backticks), ``string``, ``comment``,
    ``space`` or ``other`` (one character)."""

    kind: str
    text: str


_WORD = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.]|-(?!-))*")


def tokens(query: str) -> Iterator[Token]:
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in "'\"`":
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if query[j] == "\\" and c != "`" else 1
            yield Token("quoted" if c == "`" else "string", query[i:j + 1])
            i = j + 1
        elif query.startswith("--", i):
            j = query.find("\n", i)
            j = n if j < 0 else j
            yield Token("comment", query[i:j])
            i = j
        elif query.startswith("/*", i):
            j = query.find("*/", i + 2)
            j = n if j < 0 else j + 2
            yield Token("comment", query[i:j])
            i = j
        elif c.isspace():
            j = i
            while j < n and query[j].isspace():
                j += 1
            yield Token("space", query[i:j])
            i = j
        elif (m := _WORD.match(query, i)) is not None:
            yield Token("word", m.group(0).rstrip(".-"))
            i += len(m.group(0).rstrip(".-"))
        else:
            yield Token("other", c)
            i += 1


def first_word(query: str) -> str:
    """The statement's first word, after comments, spaces and opening parentheses ("" if it starts otherwise)."""
    for t in tokens(query):
        if t.kind == "word":
            return t.text
        if t.kind not in ("space", "comment") and t.text != "(":
            return ""
    return ""


def split_statements(text: str) -> tuple[list[str], str]:
    """Complete statements (ended by ``;`` outside strings, quotes and comments) and the unfinished rest."""
    done: list[str] = []
    current: list[str] = []
    for t in tokens(text):
        if t.kind == "other" and t.text == ";":
            stmt = "".join(current).strip()
            if stmt:
                done.append(stmt)
            current = []
        else:
            current.append(t.text)
    return done, "".join(current)


def query_problem(sql: str) -> str | None:
    """Why ``sql`` is not a query, as one line (None when it starts like one)."""
    word = first_word(sql).lower()
    if word in QUERY_STARTS:
        return None
    starts = ", ".join(w.upper() for w in QUERY_STARTS[:-1]) + f" or {QUERY_STARTS[-1].upper()}"
    what = f"it starts with '{word.upper()}'" if word else ("it is empty" if not sql.strip() else
                                                           f"it starts with {sql.strip()[:1]!r}")
    return f"not a query: {what}; a query starts with {starts}"
