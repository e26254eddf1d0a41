"""How the engine reports a full disk: named as such (not an anonymous internal error), located by the coordinator."""
from __future__ import annotations

import errno

from odf_core.engine import internal_error as client_error
from spark_jobs.errors import internal_error_response


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
    answer = internal_error_response(
        _failure_caused_by(OSError(errno.ENOSPC, "Error writing bytes to file. Detail: ...")))
    assert (answer.message, answer.error_class) == ("no space left on device", "ENOSPC")
    assert "RuntimeError" in answer.backtrace
    err = client_error("ingest of dataset 'x'", answer.message, answer.error_class, answer.backtrace,
                       where="/staging/x/t1")
    text = str(err)
    assert text.startswith("ingest of dataset 'x' failed: no space left on device while writing under /staging/x/t1 "
                           f"(trace in {tmp_path}/") and "\n" not in text


def test_other_os_errors_stay_internal_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("ODF_LOG_DIR", str(tmp_path))
    answer = internal_error_response(_failure_caused_by(OSError(errno.EBADF, "Bad file descriptor")))
    assert answer.error_class is None and answer.message.startswith("RuntimeError: writing the slice failed")


def test_the_client_trusts_the_error_class_not_the_message_text(tmp_path, monkeypatch):
    """A disk failure travels as a typed error class; text that merely looks like one is an ordinary failure."""
    monkeypatch.setenv("ODF_LOG_DIR", str(tmp_path))
    lookalike = str(client_error("transform", "[ENOSPC] no space left on device", None, None, where="/w"))
    assert lookalike == "transform failed: [ENOSPC] no space left on device"
    # an engine of an earlier build repeated the class in the message: still one clean line
    legacy = str(client_error("transform", "[EROFS] read-only file system", "EROFS", None, where="/w"))
    assert legacy == "transform failed: read-only file system while writing under /w"


def test_a_transforms_full_disk_keeps_its_class_through_the_specs_internal_error(tmp_path, monkeypatch):
    """``TransformResponse::InternalError`` (the spec's) has no error-class field: the engine puts the class before the
    message and the coordinator still locates the full disk."""
    from odf_core.engine.protocol import OdfTransformResponse
    from odf_core.engine.responses import unwrap
    from odf_core.metadata.engine_ops import TransformResponseInternalError
    from spark_jobs.transform import _classed

    monkeypatch.setenv("ODF_LOG_DIR", str(tmp_path))
    answer = internal_error_response(
        _failure_caused_by(OSError(errno.ENOSPC, "Error writing bytes to file. Detail: ...")))
    sent = TransformResponseInternalError(message=_classed(answer.message, answer.error_class), backtrace="trace")
    try:
        unwrap(OdfTransformResponse(response=sent), OdfTransformResponse, "transformation of dataset 't'",
               invalid=ValueError, where="/staging/t/x")
    except Exception as e:  # noqa: BLE001 - the error's text is what is checked
        text = str(e)
    assert text.startswith("transformation of dataset 't' failed: no space left on device while writing under "
                           "/staging/t/x (trace in "), text
    assert _classed("RuntimeError: boom", None) == "RuntimeError: boom"
