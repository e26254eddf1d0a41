"""``PrepStep::Decompress``: gunzip a file or extract members of a zip archive, streamed to disk.

``subPath`` selects zip members with a glob over member paths (``*`` and ``?`` stay within one path segment,
``**`` spans segments, ``[...]`` classes); all matches are extracted in member-name order.  Without ``subPath`` the
archive must hold exactly one file.  Output names are chosen here (never taken as paths from the archive).
"""
from __future__ import annotations

import gzip
import re
import zipfile
import zlib

from odf_core.ingest.errors import PrepareError
from odf_core.ingest.staging import Progress, copy_stream, part_file

_GZ_SUFFIX = re.compile(r"\.(gz|gzip)$", re.IGNORECASE)


def gunzip(src: str, dest: str) -> int:
    progress = Progress(f"gunzip {src}")
    try:
        with part_file(dest) as tmp, gzip.open(src, "rb") as fin, open(tmp, "wb") as fout:
            size = copy_stream(fin, fout, progress)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise PrepareError(f"Decompress Gzip: {src} is not a valid gzip file: {e}") from None
    progress.done()
    return size


def gunzipped_name(name: str) -> str:
    return _GZ_SUFFIX.sub("", name) or name


def select_members(src: str, sub_path: str | None) -> list[zipfile.ZipInfo]:
    """The members to extract, in name order; PrepareError naming the archive and the pattern when none match."""
    try:
        with zipfile.ZipFile(src) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
    except zipfile.BadZipFile as e:
        raise PrepareError(f"Decompress Zip: {src} is not a valid zip archive: {e}") from None
    names = sorted(m.filename for m in members)
    if sub_path is None:
        if len(members) != 1:
            raise PrepareError(
                f"Decompress Zip: {src} holds {len(members)} files, set subPath to choose; members: {names}"
            )
        return members
    regex = glob_regex(sub_path.lstrip("/"))
    chosen = sorted((m for m in members if regex.fullmatch(m.filename)), key=lambda m: m.filename)
    if not chosen:
        raise PrepareError(f"Decompress Zip: no member of {src} matches subPath {sub_path!r}; members: {names}")
    return chosen


def extract_member(src: str, member: zipfile.ZipInfo, dest: str) -> int:
    progress = Progress(f"unzip {src}:{member.filename}")
    try:
        with part_file(dest) as tmp, zipfile.ZipFile(src) as zf, zf.open(member) as fin, open(tmp, "wb") as fout:
            size = copy_stream(fin, fout, progress)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as e:
        raise PrepareError(f"Decompress Zip: cannot extract {member.filename!r} from {src}: {e}") from None
    progress.done()
    return size


def glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            end = pattern.find("]", j)
            if end == -1:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)
