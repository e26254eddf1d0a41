"""odf_core.progress: plain lines when piped, a live bar on a terminal, a summary line either way."""

import io

import pytest

from odf_core.progress import progress, wants_live_bar


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_piped_output_is_plain_lines_with_counts_bytes_and_rate(monkeypatch):
    monkeypatch.delenv("ODF_PROGRESS", raising=False)
    out = io.StringIO()
    with progress("pull", unit="objects", total=3, stream=out, interval=0.0) as p:
        for _ in range(3):
            p.advance(1, 1024)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("pull: 1/3 objects, 1.0 KB (")  # interval 0: a line per advance,
    # and no summary repeating the last of them
    assert lines[-1].startswith("pull: 3/3 objects, 3.0 KB (")
    assert "/s)" in lines[-1]
    assert not any("\x1b[" in line for line in lines)  # no terminal escapes in logs


def test_failed_work_adds_no_line_to_its_error_in_logs(monkeypatch):
    monkeypatch.delenv("ODF_PROGRESS", raising=False)
    out = io.StringIO()
    with pytest.raises(KeyError):
        with progress("verify", unit="blocks", stream=out) as p:
            p.advance(2)
            raise KeyError("x")
    assert out.getvalue() == ""


def test_terminal_gets_a_live_bar_and_env_overrides(monkeypatch):
    monkeypatch.delenv("ODF_PROGRESS", raising=False)
    assert wants_live_bar(_Tty()) and not wants_live_bar(io.StringIO())
    monkeypatch.setenv("ODF_PROGRESS", "never")
    assert not wants_live_bar(_Tty())
    monkeypatch.setenv("ODF_PROGRESS", "always")
    out = _Tty()
    with progress("push", unit="objects", total=2, stream=out) as p:
        p.advance(2, 2048)
    text = out.getvalue()
    assert "\x1b[" in text  # drawn by rich
    assert "push: 2/2 objects, 2.0 KB" in text
