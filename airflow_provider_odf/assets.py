"""Airflow Assets of ODF datasets: one Asset per dataset, ``odf://<namespace>/<dataset name>``.

The namespace names the workspace as Airflow sees it (by default the ``odf`` connection id, see
``asset_namespace`` in ``odf-dags.yaml``); dataset names are case-insensitive in ODF, so the URI carries the
lower-case name and both parts are normalized. A workspace path or bucket never appears in the URI: moving a
workspace does not break the DAGs scheduled on its datasets.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import SplitResult

from odf_core.identity.names import HOSTNAME_RE

if TYPE_CHECKING:
    from airflow.sdk import Asset

SCHEME = "odf"
GROUP = "odf"
# RFC 3986 reg-name characters an Airflow connection id can contain.
_NAMESPACE = re.compile(r"^[a-z0-9._~-]+$")


def asset_uri(namespace: str, dataset: str) -> str:
    """The stable URI of a dataset's Asset; raises ValueError for a namespace or name that cannot be one."""
    ns, name = namespace.strip().lower(), dataset.strip().lower()
    _check(ns, name, f"{SCHEME}://{namespace}/{dataset}")
    return f"{SCHEME}://{ns}/{name}"


def odf_asset(namespace: str, dataset: str) -> "Asset":
    from airflow.sdk import Asset

    return Asset(uri=asset_uri(namespace, dataset), group=GROUP)


def normalize_odf_uri(parts: SplitResult) -> SplitResult:
    """Asset URI handler registered for the ``odf`` scheme (provider info ``asset-uris``)."""
    ns = parts.netloc.lower()
    name = parts.path.lstrip("/").lower()
    _check(ns, name, parts.geturl())
    if parts.query:
        raise ValueError(f"invalid ODF asset URI {parts.geturl()!r}: no query is allowed")
    return parts._replace(netloc=ns, path=f"/{name}")


def _check(ns: str, name: str, uri: str) -> None:
    if not _NAMESPACE.match(ns):
        raise ValueError(f"invalid ODF asset URI {uri!r}: namespace {ns!r} must be letters, digits, '.', '_', '~', '-'")
    if not HOSTNAME_RE.match(name):
        raise ValueError(f"invalid ODF asset URI {uri!r}: {name!r} is not a dataset name (expected odf://<namespace>/<name>)")
