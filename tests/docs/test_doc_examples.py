"""Every example in docs/*.md and the README runs (or says why not): the docs cannot drift from what the code does.

Convention (also in docs/README.md):

* ```` ```console ```` blocks run, top to bottom, in one fresh temporary directory per page (the page's examples form
  one session: files written by earlier blocks are there for later ones). A line ``$ COMMAND`` is a command (a
  trailing ``\\`` continues it on the next line); the lines after it, up to the next ``$``, are expected output: each
  must appear in the command's output (stdout and stderr), in order; ``...`` inside a line matches anything.
  ``odf …`` runs in this process through ``odf_core.cli.main`` (so every page shares the test run's one Spark
  session); anything else (and an ``odf`` command with pipes, redirections or ``$`` variables) runs with
  ``bash -c`` in the directory. A command must exit 0, unless its expected output
  holds ``odf: error:`` — then it must exit 1.
* ```` ```yaml ```` blocks whose first line is ``# file: PATH`` are written to PATH in that directory before the
  next block runs; ```` ```python ```` blocks with ``# file: PATH`` too.
* Every ``kind: DatasetSnapshot`` YAML block (with or without ``# file:``) is also validated by ``odf add`` into a
  scratch workspace of its page, in page order (so a derivative's inputs come from earlier examples); a YAML block
  named ``odf-dags.yaml`` is loaded by the DAG factory's settings reader and must have no problem.
* Any other block — and any block that must not run — carries ``<!-- no-test: REASON -->`` on the line before its
  fence. :func:`test_every_example_runs_or_says_why_not` fails on a block that neither runs nor has a reason.
* A fence may be indented (a block inside a list item); its lines are read without that indentation.

Each page's test counts what it did (commands run, files written, snapshots and settings checked) and fails on a
block that should have run but did nothing (a ``console`` block without a ``$`` line); a page with no example to run
is reported as skipped with its reasons, never as passed.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from odf_core.cli import main as odf_main

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^( *)```(\S*)\s*$")
_NO_TEST = re.compile(r"<!--\s*no-test:\s*(.*?)\s*-->")
_FILE = re.compile(r"^#\s*file:\s*(\S+)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    no_test: str | None

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name
        return f"{page}:{self.line}"

    @property
    def label(self) -> str:
        return f"{self.where} ({self.lang or 'no language'})"

    @property
    def file(self) -> str | None:
        first = self.text.split("\n", 1)[0]
        m = _FILE.match(first)
        return m.group(1) if m else None

    @property
    def is_snapshot(self) -> bool:
        return self.lang in ("yaml", "yml") and re.search(r"^kind:\s*DatasetSnapshot\s*$", self.text, re.M) is not None

    @property
    def runs(self) -> bool:
        if self.no_test is not None:
            return False
        if self.lang == "console" or self.is_snapshot:
            return True
        return self.lang in ("yaml", "yml", "python") and self.file is not None


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != indent + "```":
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        reason = _NO_TEST.search(prev)
        body = [line.removeprefix(indent) for line in lines[start + 1:j]]
        out.append(Block(page, start + 1, m.group(2).lower(), "\n".join(body) + "\n",
                         reason.group(1) if reason else None))
        i = j + 1
    return out


@dataclass(frozen=True)
class Command:
    argv: str
    expected: tuple[str, ...]


def commands(block: Block) -> list[Command]:
    out: list[Command] = []
    cmd: list[str] | None = None
    expected: list[str] = []
    continuing = False
    for raw in block.text.splitlines():
        if continuing and cmd is not None:
            cmd.append(raw.rstrip().removesuffix("\\").strip())
            continuing = raw.rstrip().endswith("\\")
            continue
        if raw.startswith("$ "):
            if cmd is not None:
                out.append(Command(" ".join(cmd), tuple(expected)))
            cmd, expected = [raw[2:].rstrip().removesuffix("\\").strip()], []
            continuing = raw.rstrip().endswith("\\")
        elif raw.strip():
            assert cmd is not None, f"{block.where}: output before the first '$ ' command"
            expected.append(raw.strip())
    if cmd is not None:
        out.append(Command(" ".join(cmd), tuple(expected)))
    return out


def _odf_in_process(argv: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            code = odf_main(argv)
        except SystemExit as e:  # argparse: --help, usage errors
            code = e.code if isinstance(e.code, int) else 1
    return code, buf.getvalue()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["ODF_PROGRESS"] = "never"
    return env


def run_command(cmd: Command, cwd: Path, where: str) -> None:
    words = shlex.split(cmd.argv)
    shell = any(w in ("|", ">", "<", "&&", ";") for w in words) or "$" in cmd.argv  # pipes, variables: bash
    if words and words[0] == "odf" and not shell:
        code, output = _odf_in_process(words[1:])
    else:
        proc = subprocess.run(["bash", "-c", cmd.argv], cwd=cwd, env=_env(), capture_output=True, text=True,
                              timeout=300)
        code, output = proc.returncode, proc.stdout + proc.stderr
    want_error = any("odf: error:" in e for e in cmd.expected)
    assert code == (1 if want_error else 0), f"{where}: $ {cmd.argv}\nexit {code}, output:\n{output}"
    pos = 0
    for line in cmd.expected:
        pattern = ".*?".join(re.escape(part) for part in line.split("..."))
        m = re.compile(pattern).search(output, pos)
        assert m is not None, f"{where}: $ {cmd.argv}\nexpected (in order) {line!r}\nin output:\n{output}"
        pos = m.end()


def check_settings_file(path: Path, where: str) -> None:
    from airflow_provider_odf.dag_factory.config import load_settings

    settings = load_settings(path)
    assert not settings.dataset_errors, f"{where}: {settings.dataset_errors}"


def run_page(page: Path, workdir: Path) -> dict[str, int]:
    """Run every runnable block of ``page`` in ``workdir``; returns what each did (block -> commands run, files
    written, snapshots and settings checked)."""
    scratch = workdir.parent / (workdir.name + "-snapshots")
    scratch.mkdir()
    assert _odf_in_process(["-w", str(scratch / ".odf"), "init"])[0] == 0
    did: dict[str, int] = {}
    for n, block in enumerate(blocks(page)):
        if not block.runs:
            continue
        done = 0
        if block.file:
            done += 1
            target = workdir / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            if target.name == "odf-dags.yaml":
                check_settings_file(target, block.where)
        if block.is_snapshot:
            done += 1
            snap = scratch / f"{n:03d}.yaml"
            snap.write_text(block.text, encoding="utf-8")
            code, output = _odf_in_process(["-w", str(scratch / ".odf"), "add", str(snap)])
            assert code == 0, f"{block.where}: odf add refused the example:\n{output}"
        if block.lang == "console":
            for cmd in commands(block):
                run_command(cmd, workdir, block.where)
                done += 1
        did[block.label] = done
    return did


# -- the tests ------------------------------------------------------------------------------------------------------


def test_every_example_runs_or_says_why_not():
    """A new example that the runner would silently skip is a failure: run it or give the reason."""
    silent = [b.label for page in DOCS for b in blocks(page) if not b.runs and not (b.no_test or "").strip()]
    assert silent == [], "fenced blocks that neither run nor carry <!-- no-test: reason -->:\n" + "\n".join(silent)


def test_the_convention_finds_blocks_reasons_and_commands(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n<!-- no-test: needs a cluster -->\n\n```bash\nspark-submit x\n```\n"
                    "```console\n$ echo a \\\n  b\na b\n$ true\n```\n```yaml\n# file: d/x.yaml\nk: v\n```\n"
                    "```text\nplain\n```\n")
    bs = blocks(page)
    assert [(b.lang, b.no_test, b.runs) for b in bs] == [("bash", "needs a cluster", False), ("console", None, True),
                                                        ("yaml", None, True), ("text", None, False)]
    assert commands(bs[1]) == [Command("echo a b", ("a b",)), Command("true", ())]
    assert bs[2].file == "d/x.yaml"
    with pytest.raises(AssertionError, match="expected"):
        run_command(Command("echo hello", ("goodbye",)), tmp_path, "p.md:1")
    with pytest.raises(AssertionError, match="exit 1"):
        run_command(Command("false", ()), tmp_path, "p.md:1")
    run_command(Command("odf -w ws log nope", ("odf: error: ws is not an odf workspace",)), tmp_path, "p.md:1")


def test_indented_fences_and_blocks_that_do_nothing(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("- an item:\n\n  ```yaml\n  # file: odf-dags.yaml\n  defaults:\n    retries: 1\n  ```\n\n"
                    "```console\njust text, no command\n```\n")
    indented, idle = blocks(page)
    assert (indented.lang, indented.file, indented.text) == ("yaml", "odf-dags.yaml",
                                                             "# file: odf-dags.yaml\ndefaults:\n  retries: 1\n")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(AssertionError, match="output before the first"):
        run_page(page, work)
    page.write_text(page.read_text().replace("```console\njust text, no command\n```\n", "```console\n```\n"))
    work2 = tmp_path / "work2"
    work2.mkdir()
    assert run_page(page, work2) == {"p.md:3 (yaml)": 1, "p.md:9 (console)": 0}  # the page's test fails on the 0
    assert (work2 / "odf-dags.yaml").read_text().startswith("# file: odf-dags.yaml")


@pytest.mark.spark
@pytest.mark.parametrize("page", DOCS, ids=[p.name for p in DOCS])
def test_page_examples(page, tmp_path, monkeypatch, spark):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("ODF_PROGRESS", "never")
    monkeypatch.delenv("ODF_ENGINE_URL", raising=False)
    did = run_page(page, work)
    idle = [label for label, n in did.items() if n == 0]
    assert idle == [], f"blocks that should run but did nothing: {idle}"
    print(f"{page.name}: ran {sum(did.values())} commands/files/checks in {len(did)} blocks")
    if not did:
        reasons = sorted({b.no_test for b in blocks(page) if b.no_test})
        pytest.skip(f"{page.name} has no example to run" + (f" (no-test: {'; '.join(reasons)})" if reasons else ""))
