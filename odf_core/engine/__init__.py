"""Running the Spark engine: in this process, one spark-submit per request, or a long-lived engine over gRPC.

All three take the typed requests of :mod:`odf_core.engine.protocol` and end in the same engine code
(``spark_jobs.dispatch.handle``). Heavy imports (pyspark, grpc) happen only when an engine is used.
"""
from typing import TYPE_CHECKING, Any

from odf_core.engine.base import (  # noqa: F401
    Engine,
    EngineBusy,
    EngineError,
    EngineTimeout,
    EngineUnavailable,
    internal_error,
    log_dir,
    write_error_log,
)
from odf_core.lazy_exports import lazy_exports

# each engine kind on first use (odf_core.lazy_exports): a client of a long-lived engine loads neither of these
__getattr__ = lazy_exports(globals(), {"LocalEngine": "local", "SubmitEngine": "submit"})

if TYPE_CHECKING:
    from odf_core.engine.local import LocalEngine  # noqa: F401
    from odf_core.engine.remote import RemoteEngine
    from odf_core.engine.submit import SubmitEngine  # noqa: F401


def spark_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return "unknown"


ENGINE_URL_ENV = "ODF_ENGINE_URL"


def remote_engine(url: str, **kwargs: Any) -> "RemoteEngine":
    """A client of ``odf engine serve`` at ``grpc://HOST:PORT``, ``grpcs://HOST:PORT`` or ``unix:///PATH``; without
    ``credentials`` it presents what the ``ODF_ENGINE_*`` variables name (token, CA, client certificate)."""
    from odf_core.engine.credentials import ClientCredentials
    from odf_core.engine.remote import RemoteEngine

    if kwargs.get("credentials") is None:
        kwargs["credentials"] = ClientCredentials.from_env()
    return RemoteEngine(url, **kwargs)
