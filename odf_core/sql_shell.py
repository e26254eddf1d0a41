"""``odf sql`` without a query: statements from a prompt or a pipe, all served by ONE engine (one Spark session).

Each statement ends with ``;`` (the last one may also end with the input). A failing statement prints its one-line
error and the shell goes on; the exit code says whether any failed, so scripts can pipe statements in.
"""
from __future__ import annotations

import sys
import time
from typing import IO, Callable

from odf_core.errors import OdfError
from odf_core.engine.sql_text import split_statements
from odf_core.query import engine_label, sql
from odf_core.workspace import Workspace


def format_table(table) -> str:
    """A table as aligned text (pandas' layout)."""
    from odf_core import pandas_deferred

    pandas_deferred.load()
    return table.to_pandas().to_string(index=False) if table.num_rows else "(no rows)"


def run_one(ws: Workspace, query: str, engine, limit: int, verbose: bool, out: IO[str]) -> None:
    """One statement: its rows, and with ``verbose`` what served it (the Spark application) and how long it took."""
    t0 = time.monotonic()
    table = sql(ws, query, engine, limit=limit)
    print(format_table(table), file=out, flush=True)
    if verbose:
        print(f"-- {table.num_rows} row(s) in {time.monotonic() - t0:.2f} s, {engine_label(engine)}", file=out,
              flush=True)


def shell(ws: Workspace, engine, *, limit: int, verbose: bool, stdin: IO[str] | None = None,
          out: IO[str] | None = None, err: IO[str] | None = None,
          readline: Callable[[str], str] | None = None) -> int:
    """Read statements until end of input; 0 when every statement ran, 1 when any failed."""
    stdin = stdin or sys.stdin
    out = out or sys.stdout
    err = err or sys.stderr
    interactive = readline is not None or stdin.isatty()
    if interactive and readline is None:
        readline = input
    if interactive:
        print("odf sql: statements end with ';', Ctrl-D quits; one Spark session serves them all", file=err)
    failed = False
    rest = ""

    def execute(statements: list[str]) -> None:
        nonlocal failed
        for q in statements:
            try:
                run_one(ws, q, engine, limit, verbose, out)
            except OdfError as e:
                failed = True
                print(f"odf: error: {e}", file=err, flush=True)

    while True:
        try:
            if interactive:
                assert readline is not None
                line = readline("odf> " if not rest.strip() else "...> ") + "\n"
            else:
                line = stdin.readline()
                if not line:
                    break
        except EOFError:
            break
        done, rest = split_statements(rest + line)
        execute(done)
    if rest.strip():
        execute([rest.strip()])
    return 1 if failed else 0
