"""The ``odf`` command line. Every command calls the same library functions the Airflow operators use."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from odf_core.errors import OdfError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def deco(fn):
        COMMANDS[name] = fn
        return fn

    return deco


def _workspace(args):
    from odf_core.workspace import WORKSPACE_MARKER, Workspace, WorkspaceNotFound, find_workspace

    given = args.workspace
    if given and "://" not in given and not (Path(given) / WORKSPACE_MARKER).is_file():
        # a mistyped local --workspace would otherwise read as an empty workspace (and list nothing)
        raise WorkspaceNotFound(f"{given} is not an odf workspace (no {WORKSPACE_MARKER} in it): "
                                f"create one with 'odf -w {given} init'")
    return Workspace.open(given or find_workspace())


# -- workspace ---------------------------------------------------------------------------------------------------


@command("init")
def cmd_init(args) -> int:
    from odf_core.workspace import WORKSPACE_DIR, Workspace

    location = args.workspace or str(Path.cwd() / WORKSPACE_DIR)
    if Path(location).exists() and not args.exist_ok:
        raise OdfError(f"workspace {location} already exists")
    Workspace.init(location)
    print(f"Initialized an empty workspace in {location}")
    return 0


def _snapshot_files(paths: list[str], recursive: bool) -> list[Path]:
    from odf_core.snapshots import snapshot_files

    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = snapshot_files(p, recursive=recursive)
            if not found:
                raise OdfError(f"{p}: no .yaml or .yml files" + ("" if recursive else " (--recursive also reads "
                                                                               "its subfolders)"))
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise OdfError(f"{p}: no such file or directory")
    return files


@command("add")
def cmd_add(args) -> int:
    from odf_core.metadata import SetTransform
    from odf_core.snapshots import apply_changes, plan_changes, read_snapshot_files

    ws = _workspace(args)
    docs = read_snapshot_files(_snapshot_files(args.paths, args.recursive))
    plan = plan_changes(ws, docs, "update" if args.update else "exist_ok" if args.exist_ok else "add")
    plan.raise_problems()  # the whole batch is checked before anything is written (evolved queries by Spark, below)
    for line in plan.skipped:
        print(line)
    evolves = any(isinstance(c.event, SetTransform) for c in plan.changes)

    def report(change, handle) -> None:
        if change.event is None:
            st = handle.state()
            print(f"Added {handle.name} ({st.kind.value}, {st.dataset_id})")
        else:
            print(change.message[:1].upper() + change.message[1:])

    applied = apply_changes(ws, plan, engine=_engine(args) if evolves else None, atomic=True, on_change=report)
    if applied.failures:
        more = len(applied.failures) - 1
        raise OdfError(applied.failures[0] + (f" (and {more} more)" if more else ""))
    if args.update and not plan.changes:
        print("Everything is up to date")
    return 0


@command("list")
def cmd_list(args) -> int:
    ws = _workspace(args)
    if args.output == "json":
        from odf_core.output import write_json_lines

        write_json_lines(({"name": str(h.name), "kind": st.kind.value if st.kind else None,
                           "id": str(st.dataset_id), "blocks": st.block_count, "records": st.num_records,
                           "size": st.data_size, "watermark": str(st.last_watermark) if st.last_watermark else None}
                          for h in ws.list() for st in (h.state(),)), sys.stdout)
        return 0
    rows = [("NAME", "KIND", "BLOCKS", "RECORDS", "SIZE", "WATERMARK")]
    for h in ws.list():
        st = h.state()
        rows.append((str(h.name), st.kind.value if st.kind else "?", str(st.block_count), str(st.num_records),
                     str(st.data_size), str(st.last_watermark or "-")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


@command("log")
def cmd_log(args) -> int:
    from odf_core.metadata.yaml_serde import dump_manifest

    h = _workspace(args).get(args.dataset)
    for i, (bh, block) in enumerate(h.chain.iter_blocks()):
        if args.limit is not None and i >= args.limit:
            break
        if args.output == "json":
            import yaml

            from odf_core.output import write_json_lines

            write_json_lines([{"block_hash": str(bh), **yaml.safe_load(dump_manifest(block))}], sys.stdout)
            continue
        print(f"# Block: {bh}")
        print(dump_manifest(block), end="")
        print("---")
    return 0


@command("rename")
def cmd_rename(args) -> int:
    h = _workspace(args).rename(args.dataset, args.new_name)
    print(f"Renamed {args.dataset} to {h.name}")
    return 0


@command("delete")
def cmd_delete(args) -> int:
    _workspace(args).delete(args.dataset, force=args.force)
    print(f"Deleted {args.dataset}")
    return 0


@command("verify")
def cmd_verify(args) -> int:
    from odf_core.chain.integrity import verify_integrity

    ws = _workspace(args)
    h = ws.get(args.dataset)
    report = verify_integrity(h.store)
    if not report.ok:
        raise OdfError(f"{h.name}: {report.summary()}")
    print(f"{h.name}: integrity {report.summary()}")
    if not args.integrity and h.state().transform is not None:
        from odf_core.transform import verify

        from odf_core.progress import progress

        with progress(f"{h.name}: replay", unit="transforms") as p:
            rep = verify(ws, args.dataset, engine=_engine(args), progress=p)
        for note in rep.other_engine:
            print(f"{h.name}: {note}")
        if rep.engine_differs:  # not tampering: the recorded engine computes differently (docs/upgrading.md)
            print(f"odf: {h.name}: reproduction {rep.summary()}", file=sys.stderr)
            return 3
        if not rep.ok:
            raise OdfError(f"{h.name}: {rep.summary()}")
        print(f"{h.name}: reproduction {rep.summary()}")
    return 0


@command("set-transform")
def cmd_set_transform(args) -> int:
    from odf_core.metadata import SetTransform
    from odf_core.snapshot_read import read_snapshot_file
    from odf_core.transform import set_transform

    ws = _workspace(args)
    if args.upgrade_engine:
        from odf_core.transform import upgrade_engine

        if args.file is not None:
            raise OdfError(f"set-transform --upgrade-engine keeps the dataset's query: drop the file argument "
                           f"'{args.file}'")
        head = upgrade_engine(ws, args.dataset, engine=_engine(args))
        print(f"{args.dataset}: " + (f"transform recorded for this engine in block {head}" if head else
                                     "the transform is already recorded for this engine"))
        return 0
    if args.file is None:
        raise OdfError("set-transform needs a DatasetSnapshot FILE with the new SetTransform (or --upgrade-engine)")
    docs = read_snapshot_file(args.file)  # every query step checked with its file and line, as ``odf add`` does
    broken = next((d.error for d in docs if d.error is not None), None)
    if broken is not None:
        raise broken
    events = [e for d in docs if d.snapshot is not None for e in d.snapshot.metadata if isinstance(e, SetTransform)]
    if len(docs) != 1 or len(events) != 1:
        raise OdfError(f"{args.file}: expected a DatasetSnapshot with exactly one SetTransform event")
    h = set_transform(ws, args.dataset, events[0], engine=_engine(args))
    print(f"{args.dataset}: new transform committed in block {h}")
    return 0


@command("gc")
def cmd_gc(args) -> int:
    from odf_core.gc import collect, format_report

    report = collect(_workspace(args), min_age_s=args.min_age, dry_run=args.dry_run)
    for line in format_report(report):
        print(line)
    for problem in report.problems:
        print(f"odf gc: {problem}", file=sys.stderr)
    return 1 if report.problems else 0


# -- ingestion and queries ---------------------------------------------------------------------------------------


def _engine(args):
    """The long-lived engine named by ``--engine`` / ``$ODF_ENGINE_URL`` (``auto``: this user's own, started on
    first use), else Spark in this process."""
    import os

    from odf_core.engine import ENGINE_URL_ENV, remote_engine
    from odf_core.engine.autostart import auto_engine, is_auto

    url = getattr(args, "engine", None) or os.environ.get(ENGINE_URL_ENV)
    if url:  # a long-lived engine, ``auto`` included
        from odf_core import pandas_deferred

        pandas_deferred.defer()  # no Spark in this process: pyarrow's checks need no pandas
    if is_auto(url):
        return auto_engine(credentials=_engine_credentials(args))
    if url:
        return remote_engine(url, credentials=_engine_credentials(args))
    conf = {}
    for kv in getattr(args, "conf", None) or ():
        key, sep, value = kv.partition("=")
        if not sep or not key.strip():
            raise OdfError(f"--conf {kv!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    from odf_core.engine.local import LocalEngine

    return LocalEngine(master=getattr(args, "master", None) or "local[*]", conf=conf)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _bytes_per_s(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of bytes per second >= 0, got {text!r}")
    return int(text)


def _fetch_options(args):
    """FetchOptions from the ``--fetch-*`` flags of ``odf pull`` (unset flags keep the defaults)."""
    from odf_core.ingest import FetchOptions

    given = {"timeout_s": args.fetch_timeout, "deadline_s": args.fetch_deadline,
             "min_bytes_per_s": args.fetch_min_rate, "stall_window_s": args.fetch_stall_window}
    return FetchOptions(**{k: v for k, v in given.items() if v is not None})


def _ingest_options(args):
    """IngestOptions from ``--duplicates`` of ``odf pull`` / ``odf ingest``."""
    from odf_core.ingest import IngestOptions

    return IngestOptions(duplicates=args.duplicates)


def _duplicates_option(s: argparse.ArgumentParser) -> None:
    s.add_argument("--duplicates", choices=("first", "error"), default="first",
                   help="Ledger sources: rows repeating the primary key of an earlier row of the same input are "
                        "dropped and counted (first, the default: the first per key is kept) or refuse the input "
                        "(error: nothing is committed)")


@command("pull")
def cmd_pull(args) -> int:
    from odf_core.progress import progress
    from odf_core.repository.cli_support import pull_remotes

    ws = _workspace(args)
    names = pull_remotes(ws, args.datasets, as_name=args.as_name, force=args.force, recursive=args.recursive)
    if not names:
        return 0
    engine = _engine(args)
    if args.recursive:
        from odf_core.transform import upstream_order

        names = upstream_order(ws, names)
    for name in names:
        state = ws.get(name).state()
        kind = state.kind.value
        if kind == "Root" and state.polling_source is None and args.recursive:
            print(f"{name}: push sources only, nothing to pull")
            continue
        if kind == "Derivative":
            from odf_core.transform import run as run_transform

            from odf_core.transform import input_without_data

            with progress(f"{name}: transform", unit="rows") as p:
                res = run_transform(ws, name, engine=engine)
                if res and res.block_hash:
                    p.advance(res.num_records or 0)
            if res and res.block_hash:
                print(f"{name}: {res.num_records} records, head {res.head}")
            elif (empty := input_without_data(ws, name)) is not None:
                hint = "it is pushed to, not pulled" if args.recursive else "pull it first, or pull with --recursive"
                print(f"{name}: waiting: its input '{empty}' has no data yet ({hint})")
            else:
                print(f"{name}: up to date")
            continue
        from odf_core.ingest.transaction import pull  # a root's polling source: derivatives need no ingest code

        with progress(f"{name}: fetch", unit="files") as p:
            results = pull(ws, name, engine, once=args.once, options=_fetch_options(args), progress=p,
                           ingest_options=_ingest_options(args))
        for r in results:
            if r.block_hash:
                print(f"{name}: {r.num_records} records at offsets {r.offset_interval}, head {r.block_hash}"
                      f"{r.duplicates_note()}")
            else:
                print(f"{name}: up to date")
    return 0


# -- repositories (odf_core.repository) ----------------------------------------------------------------------------


@command("push")
def cmd_push(args) -> int:
    from odf_core.repository.cli_support import push_datasets

    return push_datasets(_workspace(args), args.datasets, to=args.to, force=args.force)


@command("repo add")
def cmd_repo_add(args) -> int:
    from odf_core.repository.cli_support import repo_add

    return repo_add(_workspace(args), args.name, args.url)


@command("repo list")
def cmd_repo_list(args) -> int:
    from odf_core.repository.cli_support import repo_list

    return repo_list(_workspace(args))


@command("repo delete")
def cmd_repo_delete(args) -> int:
    from odf_core.repository.cli_support import repo_delete

    return repo_delete(_workspace(args), args.name)


@command("serve")
def cmd_serve(args) -> int:
    from odf_core.repository.cli_support import serve

    return serve(_workspace(args), args.host, args.port)


@command("ingest")
def cmd_ingest(args) -> int:
    from odf_core.ingest.transaction import push

    from odf_core.progress import progress

    ws = _workspace(args)
    size = Path(args.file).stat().st_size if args.file != "-" and Path(args.file).is_file() else 0
    with progress(f"{args.dataset}: ingest", unit="files", total=1) as p:
        r = push(ws, args.dataset, args.file, source=args.source, engine=_engine(args), txn_id=args.txn_id,
                 options=_ingest_options(args))
        p.advance(1, size)
    if r.already_ingested:
        print(f"{args.dataset}: already ingested in block {r.block_hash} (transaction {args.txn_id}), head {r.head}")
    elif r.block_hash:
        print(f"{args.dataset}: {r.num_records} records at offsets {r.offset_interval}, head {r.block_hash}"
              f"{r.duplicates_note()}")
    else:
        print(f"{args.dataset}: nothing new")
    return 0


@command("tail")
def cmd_tail(args) -> int:
    from odf_core.query import tail

    table = tail(_workspace(args).get(args.dataset), args.num_records)
    if args.output == "json":
        from odf_core.output import write_json_lines

        write_json_lines(table.to_pylist(), sys.stdout)
        return 0
    from odf_core.sql_shell import format_table

    print(format_table(table) if table.num_rows else "(no records)")
    return 0


@command("explain")
def cmd_explain(args) -> int:
    from odf_core.transform import explain, explain_lines

    answer = explain(_workspace(args), _engine(args), args.dataset)
    if answer.plan_class == "stateless":
        print(f"{args.dataset}: stateless: every step runs the query over the new input rows only")
        return 0
    path = answer.path or "full"
    print(f"{args.dataset}: stateful ({answer.reason}); {path} path"
          + (": each step costs its new rows plus the operators' state" if path == "incremental" else
             ": each step re-evaluates the query over the inputs' whole state"))
    for line in explain_lines(answer.operators or ()):
        print(f"  {line}")
    return 0


@command("sql")
def cmd_sql(args) -> int:
    from odf_core.sql_shell import run_one, shell

    ws, engine = _workspace(args), _engine(args)
    if args.query is not None and args.interactive:
        run_one(ws, args.query, engine, args.limit, args.verbose, sys.stdout)
    if args.query is None or args.interactive:
        return shell(ws, engine, limit=args.limit, verbose=args.verbose)
    run_one(ws, args.query, engine, args.limit, args.verbose, sys.stdout)
    return 0


# -- engine -----------------------------------------------------------------------------------------------------


def _engine_credentials(args):
    """Token (``--engine-token-file`` / ``$ODF_ENGINE_TOKEN_FILE``), CA and client certificate for the engine."""
    from odf_core.engine.credentials import ClientCredentials

    return ClientCredentials.from_env(token_file=getattr(args, "engine_token_file", None))


@command("engine serve")
def cmd_engine_serve(args) -> int:
    from odf_core.engine.credentials import ServeConfigError
    from odf_core.engine.serve import Guard, serve

    conf = dict(kv.partition("=")[::2] for kv in args.conf)
    guard = Guard(token_file=args.token_file, tls_cert=args.tls_cert, tls_key=args.tls_key,
                  tls_client_ca=args.tls_client_ca, socket_path=args.socket, allow_paths=tuple(args.allow_path),
                  request_timeout_s=args.request_timeout, insecure=args.insecure)
    try:
        return serve(host=args.host, port=args.port, master=args.master, conf=conf,
                     max_concurrency=args.max_concurrency, spark_submit=args.spark_submit, drain_s=args.drain_s,
                     guard=guard, idle_exit_s=args.idle_exit, pid_file=args.pid_file)
    except ServeConfigError as e:  # a usage error, found before Spark starts
        print(f"odf: error: {e}", file=sys.stderr)
        return 2


@command("engine status")
def cmd_engine_status(args) -> int:
    import os

    from odf_core.engine import ENGINE_URL_ENV, remote_engine
    from odf_core.engine.autostart import is_auto, running

    url = args.engine or os.environ.get(ENGINE_URL_ENV)
    auto = running() if is_auto(url) or not url else None  # never starts one
    if is_auto(url) and auto is None:
        raise OdfError("no auto engine runs for this version: the first command with ODF_ENGINE_URL=auto starts it")
    if auto is not None:
        url = f"unix://{auto.socket}"
    if not url:
        raise OdfError("no engine named: pass --engine grpc://HOST:PORT or set ODF_ENGINE_URL")
    h = remote_engine(url, credentials=_engine_credentials(args)).health()
    print(f"{url}: up {h.uptime_s} s, {h.running} of {h.max_concurrency} request(s) running, Spark {h.spark_version} "
          f"on {h.master}, engine {h.engine_version}")
    if auto is not None:
        print(f"auto engine: pid {auto.pid}, started {auto.started}, log {auto.log}")
    return 0


@command("engine stop")
def cmd_engine_stop(args) -> int:
    import os

    from odf_core.engine import ENGINE_URL_ENV
    from odf_core.engine.autostart import is_auto, stop_all

    url = args.engine or os.environ.get(ENGINE_URL_ENV)
    if url and not is_auto(url):
        raise OdfError(f"'odf engine stop' stops this user's auto engines (ODF_ENGINE_URL=auto) only; stop the "
                       f"engine at {url} where it runs ('odf engine serve' drains and exits on Ctrl-C or SIGTERM)")
    stopped = stop_all()
    for state in stopped:
        print(f"stopped the auto engine {state.version} (pid {state.pid}, unix://{state.socket})")
    if not stopped:
        print("no auto engine was running")
    return 0


# -- blocks and hashes -------------------------------------------------------------------------------------------


@command("block hash")
def cmd_block_hash(args) -> int:
    from odf_core.metadata import block_hash
    from odf_core.metadata.yaml_serde import read_manifest_file

    print(block_hash(read_manifest_file(args.file, expected="MetadataBlock")))
    return 0


@command("block encode")
def cmd_block_encode(args) -> int:
    from odf_core.metadata import block_hash, encode_block
    from odf_core.metadata.yaml_serde import read_manifest_file

    block = read_manifest_file(args.file, expected="MetadataBlock")
    raw = encode_block(block)
    if args.output == "-":
        sys.stdout.buffer.write(raw)
    else:
        Path(args.output).write_bytes(raw)
        print(block_hash(raw))
    return 0


@command("block decode")
def cmd_block_decode(args) -> int:
    from odf_core.metadata import decode_block
    from odf_core.metadata.yaml_serde import dump_manifest

    try:
        raw = Path(args.file).read_bytes()
    except OSError as e:
        raise OdfError(f"{args.file}: {e.strerror}") from None
    print(dump_manifest(decode_block(raw, args.file)), end="")
    return 0


@command("hash logical")
def cmd_hash_logical(args) -> int:
    from odf_core.hashing import logical_hash_file

    _require_file(args.file)
    print(logical_hash_file(args.file))
    return 0


@command("hash physical")
def cmd_hash_physical(args) -> int:
    from odf_core.hashing import physical_hash

    _require_file(args.file)
    print(physical_hash(args.file))
    return 0


def _require_file(path: str) -> None:
    if not Path(path).is_file():
        raise OdfError(f"{path}: no such file")


# -- parser ------------------------------------------------------------------------------------------------------


def _spark_options(s: argparse.ArgumentParser) -> None:
    """Where Spark work runs: a long-lived engine, or Spark in this process with a master and settings."""
    g = s.add_argument_group("Spark")
    g.add_argument("--engine", metavar="URL",
                   help="a long-lived engine started with 'odf engine serve' (grpc://HOST:PORT, grpcs://HOST:PORT "
                        "or unix:///PATH), or auto: this user's own, started on first use and stopped when idle "
                        "(default $ODF_ENGINE_URL, else Spark runs in this process)")
    g.add_argument("--engine-token-file", metavar="FILE",
                   help="the engine's token (default $ODF_ENGINE_TOKEN_FILE; docs/security.md)")
    g.add_argument("--master", default="local[*]",
                   help="Spark master when Spark runs in this process: local[N], spark://HOST:PORT, yarn, "
                        "k8s://https://HOST (default local[*])")
    g.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting when Spark runs in this process (repeatable)")


def _output_option(s: argparse.ArgumentParser) -> None:
    s.add_argument("--output", "-o", choices=("table", "json"), default="table",
                   help="json: JSON Lines, one object per line (for scripts)")


class _Refused(Exception):
    """The parser of one command (:func:`build_parser` with ``command``) refused the arguments."""


class _OneCommandParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


class _Skipped:
    """A command's parser that is not built: everything asked of it is ignored."""

    def __getattr__(self, name: str) -> Callable[..., _Skipped]:
        return lambda *args, **kwargs: self


class _OneCommand:
    """The subcommands, of which only ``command``'s parser is built."""

    def __init__(self, sub: Any, command: str) -> None:
        self.sub, self.command = sub, command

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        return self.sub.add_parser(name, **kwargs) if name == self.command else _Skipped()


def command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs when only ``--workspace``/``-w`` precede it (None: anything else, such as
    ``--help``)."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--workspace", "-w"):
            i += 2
        elif a.startswith("--workspace=") or (a.startswith("-w") and len(a) > 2 and not a.startswith("--")):
            i += 1
        elif a.startswith("-"):
            return None
        else:
            return a
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; with ``command`` only that command's parser is built (building all ~30 took 8-20 ms of
    every command) and it raises :class:`_Refused` instead of printing an error."""
    cls = argparse.ArgumentParser if command is None else _OneCommandParser
    p = cls(prog="odf", description="Open Data Fabric datasets on Spark and Airflow")
    p.add_argument("--workspace", "-w", metavar="DIR",
                   help="workspace directory or URL (default: .odf in the current or a parent directory)")
    sub: Any = p.add_subparsers(dest="cmd", required=True)
    if command is not None:
        sub = _OneCommand(sub, command)

    s = sub.add_parser("init", help="create a workspace")
    s.add_argument("--exist-ok", action="store_true")
    s = sub.add_parser("add", help="create datasets from DatasetSnapshot YAML files or folders")
    s.add_argument("paths", nargs="+")
    s.add_argument("--recursive", "-r", action="store_true")
    how = s.add_mutually_exclusive_group()
    how.add_argument("--exist-ok", action="store_true", help="skip datasets that already exist")
    how.add_argument("--update", action="store_true",
                     help="also bring existing datasets in line with their snapshots: append changed sources, "
                          "transform (validated with Spark), info, license, attachments, schema, vocabulary")
    _spark_options(s)  # evolved transforms are validated with Spark
    s = sub.add_parser("list", help="list datasets")
    _output_option(s)
    s = sub.add_parser("log", help="show a dataset's metadata blocks, newest first")
    s.add_argument("dataset")
    s.add_argument("--limit", "-n", type=int)
    _output_option(s)
    s = sub.add_parser("rename", help="rename a dataset")
    s.add_argument("dataset")
    s.add_argument("new_name")
    s = sub.add_parser("delete", help="delete a dataset")
    s.add_argument("dataset")
    s.add_argument("--force", action="store_true", help="also when other datasets use it as an input")
    s = sub.add_parser("verify", help="verify a dataset")
    s.add_argument("dataset")
    s.add_argument("--integrity", action="store_true",
                   help="only the cheap check: hashes, links, chain rules and files (default also re-runs "
                        "every transformation of a derivative dataset and compares logical hashes)")
    _spark_options(s)
    s = sub.add_parser("gc", help="remove files no dataset references: orphaned data, checkpoints and blocks, "
                       "temp files of crashed writers, staging of finished or abandoned transactions")
    s.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    s.add_argument("--min-age", type=float, default=3600.0, metavar="SECONDS",
                   help="only files unchanged for this long (default 3600): longer than any running commit or "
                        "transaction takes")
    s = sub.add_parser("set-transform", help="query evolution: validate and set a derivative's new transform")
    s.add_argument("dataset")
    s.add_argument("file", nargs="?", help="a DatasetSnapshot YAML holding the new SetTransform")
    s.add_argument("--upgrade-engine", action="store_true",
                   help="keep the query and record the running engine for it (after an upgrade that changed the "
                        "engine's semantics; docs/upgrading.md)")
    _spark_options(s)

    s = sub.add_parser("pull", help="ingest root datasets until up to date / run derivative transformations / "
                                    "sync a replica from URL, REPO/NAME or its remote")
    s.add_argument("datasets", nargs="+")
    s.add_argument("--once", action="store_true", help="at most one transaction per dataset")
    s.add_argument("--recursive", action="store_true", help="bring all upstream datasets up to date first")
    s.add_argument("--fetch-timeout", type=_seconds, metavar="S", help="HTTP connect and per-read timeout (default 60)")
    s.add_argument("--fetch-deadline", type=_seconds, metavar="S", help="one whole HTTP download (default 3600)")
    s.add_argument("--fetch-min-rate", type=_bytes_per_s, metavar="BYTES",
                   help="an HTTP download slower than BYTES/s over the stall window is abandoned "
                        "(default 1024; 0: never)")
    s.add_argument("--fetch-stall-window", type=_seconds, metavar="S", help="window of --fetch-min-rate (default 60)")
    s.add_argument("--as", dest="as_name", metavar="NAME",
                   help="local name of a dataset pulled from a URL or REPO/NAME")
    s.add_argument("--force", action="store_true", help="replace a local replica that diverged from its remote")
    _duplicates_option(s)
    _spark_options(s)
    s = sub.add_parser("push", help="send datasets to a repository (only missing objects; the remote head last)")
    s.add_argument("datasets", nargs="+")
    s.add_argument("--to", metavar="URL|REPO/NAME", help="target (default: the dataset's remembered remote)")
    s.add_argument("--force", action="store_true", help="overwrite a remote head that is not an ancestor of ours")
    repo = sub.add_parser("repo", help="named repositories (file://, s3://, http(s)://)").add_subparsers(
        dest="sub", required=True)
    s = repo.add_parser("add", help="register a repository")
    s.add_argument("name")
    s.add_argument("url")
    repo.add_parser("list", help="list repositories")
    s = repo.add_parser("delete", help="forget a repository")
    s.add_argument("name")
    s = sub.add_parser("serve", help="serve the workspace as a read-only HTTP repository (odf pull http://...)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8080, help="port (default 8080; 0: any free port)")
    s = sub.add_parser("ingest", help="push a file (or - for stdin) into a root dataset's push source")
    s.add_argument("dataset")
    s.add_argument("file")
    s.add_argument("--source", help="push source name (required when there are several)")
    s.add_argument("--txn-id", metavar="KEY", help="idempotency key, recorded in the block: re-running with the "
                   "same key (e.g. after a crash) ingests nothing if that push was committed")
    _duplicates_option(s)
    _spark_options(s)
    s = sub.add_parser("tail", help="the last records of a dataset")
    s.add_argument("dataset")
    s.add_argument("-n", "--num-records", type=int, default=10)
    _output_option(s)
    s = sub.add_parser("explain", help="how a derivative's query is evaluated: per operator, incremental or full "
                       "and why")
    s.add_argument("dataset")
    _spark_options(s)
    s = sub.add_parser("sql", help="read-only Spark SQL over datasets by name, as written (select * from my.data-set); "
                       "without a query: statements from the terminal or stdin, one Spark session for all")
    s.add_argument("query", nargs="?", help="one statement (default: read statements ending with ';' from stdin)")
    s.add_argument("-i", "--interactive", action="store_true", help="read statements from stdin even with a query")
    s.add_argument("--limit", type=int, default=1000, help="at most this many rows per statement (default 1000)")
    s.add_argument("--verbose", "-v", action="store_true",
                   help="after each result: row count, time, and the Spark application that served it")
    _spark_options(s)

    eng = sub.add_parser("engine", help="a long-lived Spark engine (the ODF engine protocol over gRPC)"
                         ).add_subparsers(dest="sub", required=True)
    s = eng.add_parser("serve", help="start an engine: one Spark driver serving every request (runs until stopped)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=5544, help="port (default 5544, the spec's engine port)")
    s.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    s.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    s.add_argument("--max-concurrency", type=int, default=4,
                   help="requests run at once; more wait in a queue of the same size, beyond it 'engine busy'")
    s.add_argument("--spark-submit", default="spark-submit", help="the spark-submit binary")
    s.add_argument("--drain-s", type=float, default=30.0,
                   help="on SIGTERM/Ctrl-C, seconds running requests get to finish before they are cancelled")
    g = s.add_argument_group("security (docs/security.md)")
    g.add_argument("--token-file", metavar="FILE", help="every call must carry this file's token "
                   "(authorization: Bearer TOKEN)")
    g.add_argument("--tls-cert", metavar="FILE", help="serve TLS with this certificate (PEM, with --tls-key)")
    g.add_argument("--tls-key", metavar="FILE", help="the TLS certificate's private key (PEM)")
    g.add_argument("--tls-client-ca", metavar="FILE", help="mutual TLS: clients need a certificate signed by this CA")
    g.add_argument("--socket", metavar="PATH", help="listen on this Unix socket (mode 0600) instead of a port")
    g.add_argument("--allow-path", action="append", default=[], metavar="DIR|s3://BUCKET/PREFIX",
                   help="requests may name paths only under these roots (repeatable; default: the working, temp "
                        "and staging directories)")
    g.add_argument("--request-timeout", type=float, default=6 * 3600.0, metavar="S",
                   help="cancel a request running longer than this (default 21600 s; 0: never)")
    g.add_argument("--insecure", action="store_true",
                   help="listen on a non-loopback address without TLS and a token")
    s.add_argument("--idle-exit", type=float, default=0.0, metavar="S",
                   help="stop after S seconds without a request (default 0: never; the auto engine's is "
                        "$ODF_ENGINE_IDLE_EXIT, default 900)")
    s.add_argument("--pid-file", metavar="FILE", help="write the pid of the engine's driver here once it listens "
                   "(SIGTERM to it drains and stops the engine)")
    s = eng.add_parser("status", help="health of a running engine (with no URL: this user's auto engine, if any)")
    s.add_argument("--engine", metavar="URL",
                   help="grpc://, grpcs://, unix:// URL or auto (default $ODF_ENGINE_URL)")
    s.add_argument("--engine-token-file", metavar="FILE", help="the engine's token (default $ODF_ENGINE_TOKEN_FILE)")
    s = eng.add_parser("stop", help="stop this user's auto engines (ODF_ENGINE_URL=auto); each drains first")
    s.add_argument("--engine", metavar="URL", help="auto (default $ODF_ENGINE_URL); other engines are stopped "
                   "where they run")

    block = sub.add_parser("block", help="metadata block tools").add_subparsers(dest="sub", required=True)
    s = block.add_parser("hash", help="multihash of a MetadataBlock manifest YAML")
    s.add_argument("file")
    s = block.add_parser("encode", help="MetadataBlock YAML -> binary manifest")
    s.add_argument("file")
    s.add_argument("-o", "--output", required=True)
    s = block.add_parser("decode", help="binary manifest -> MetadataBlock YAML")
    s.add_argument("file")

    hsh = sub.add_parser("hash", help="data hashes").add_subparsers(dest="sub", required=True)
    s = hsh.add_parser("logical", help="logical hash (arrow0-sha3-256) of a Parquet file")
    s.add_argument("file")
    s = hsh.add_parser("physical", help="physical hash (sha3-256) of a file")
    s.add_argument("file")
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed by the parser of the command it names when that is all it takes; the whole parser otherwise,
    and for every error and ``--help``, so its messages and exit codes are the whole parser's."""
    word = command_word(argv)
    if word in {name.split()[0] for name in COMMANDS}:
        try:
            return build_parser(word).parse_args(argv)
        except _Refused:
            pass
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:  # `odf --help | head -1`: argparse prints help before the command's own handling
        return _closed_stdout()
    name = args.cmd + (f" {args.sub}" if getattr(args, "sub", None) else "")
    try:
        return COMMANDS[name](args)
    except OdfError as e:
        print(f"odf: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _closed_stdout()
    except Exception as e:  # noqa: BLE001 - a bug: one line for the user, the trace in a log file
        from odf_core.errors import disk_error, os_error_reason

        disk = disk_error(e)
        if disk is not None:  # a full disk where no OdfError named the operation: still the machine, not a bug
            path = f": {disk.filename}" if disk.filename else ""
            print(f"odf: error: {os_error_reason(disk)} while running 'odf {name}'{path}", file=sys.stderr)
            return 1
        import traceback

        from odf_core.engine import write_error_log

        log_path = write_error_log(f"odf-{name}", "".join(traceback.format_exception(e)))
        where = f" (trace in {log_path})" if log_path else ""
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"odf: error: internal error in '{name}': {type(e).__name__}: {first}{where}", file=sys.stderr)
        return 1


def _closed_stdout() -> int:
    """The reader of our stdout went away: stop quietly (Python would print a BrokenPipe trace at exit when it
    flushes stdout again), as `git log | head` does."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (captured in tests)
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
