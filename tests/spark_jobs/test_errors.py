"""How the engine reports a full disk: named as such (not an anonymous internal error), located by the coordinator."""
from __future__ import annotations

import errno

from odf_core.engine import internal_error as client_error
from spark_jobs.errors import internal_error


def _failure_caused_by(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except OSError as e:
            raise RuntimeError("writing the slice failed") from e
    except RuntimeError as e:
        return e


def test_a_full_disk_is_named_and_located(tmp_path, monkeypatch):
    monkeypatch.setenv("ODF_LOG_DIR", str(tmp_path))
    # what pyarrow raises when its writer hits ENOSPC: errno set, no file name
    answer = internal_error(_failure_caused_by(OSError(errno.ENOSPC, "Error writing bytes to file. Detail: ...")))
    assert (answer.message, answer.error_class) == ("no space left on device", "ENOSPC")
    assert "RuntimeError" in answer.backtrace
    err = client_error("ingest of dataset 'x'", answer.message, answer.error_class, answer.backtrace,
                       where="/staging/x/t1")
    text = str(err)
    assert text.startswith("ingest of dataset 'x' failed: no space left on device while writing under /staging/x/t1 "
                           f"(trace in {tmp_path}/") and "\n" not in text


def test_other_os_errors_stay_internal_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("ODF_LOG_DIR", str(tmp_path))
    answer = internal_error(_failure_caused_by(OSError(errno.EBADF, "Bad file descriptor")))
    assert answer.error_class is None and answer.message.startswith("RuntimeError: writing the slice failed")


def test_the_client_trusts_the_error_class_not_the_message_text(tmp_path, monkeypatch):
    """A disk failure travels as a typed error class; text that merely looks like one is an ordinary failure."""
    monkeypatch.setenv("ODF_LOG_DIR", str(tmp_path))
    lookalike = str(client_error("transform", "[ENOSPC] no space left on device", None, None, where="/w"))
    assert lookalike == "transform failed: [ENOSPC] no space left on device"
    # an engine of an earlier build repeated the class in the message: still one clean line
    legacy = str(client_error("transform", "[EROFS] read-only file system", "EROFS", None, where="/w"))
    assert legacy == "transform failed: read-only file system while writing under /w"
