"""OpenLineage names of ODF datasets and of the sources root datasets read, one rule for every task.

An ODF dataset is ``namespace = odf://<asset namespace>`` (the workspace as Airflow names it, by default the ``odf``
connection id) and ``name = <dataset name>``: joined they are exactly the dataset's Asset URI, so OpenLineage,
Airflow's Assets and the UI agree on one name. The dataset's global id (``did:odf:``) travels in a facet.
A source is named as OpenLineage names files and URLs (``file`` + absolute path, ``https://host:port`` + path);
credentials and query strings never become part of a name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_provider_odf.assets import SCHEME, asset_uri

if TYPE_CHECKING:
    from odf_core.metadata import FetchStep


@dataclass(frozen=True)
class LineageName:
    namespace: str
    name: str


def dataset_name(asset_namespace: str, dataset: str) -> LineageName:
    """The OpenLineage name of an ODF dataset (its Asset URI split at the namespace)."""
    uri = asset_uri(asset_namespace, dataset)
    ns, _, name = uri.removeprefix(f"{SCHEME}://").partition("/")
    return LineageName(f"{SCHEME}://{ns}", name)


def location_name(location: str) -> LineageName:
    """A file path or URL as OpenLineage names it (no user info, no query, no fragment)."""
    parts = urlsplit(location)
    if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # a path (or a Windows drive letter)
        return LineageName("file", parts.path if parts.scheme == "file" else location)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return LineageName(f"{parts.scheme}://{netloc}", parts.path or "/")


def source_name(fetch: "FetchStep") -> LineageName:
    """Where a polling source fetches from: a URL, a files glob, or a container image."""
    from odf_core.metadata import FetchStepContainer, FetchStepFilesGlob, FetchStepUrl

    if isinstance(fetch, FetchStepUrl):
        return location_name(fetch.url)
    if isinstance(fetch, FetchStepFilesGlob):
        return location_name(fetch.path)
    if isinstance(fetch, FetchStepContainer):
        return LineageName("container", fetch.image)
    raise TypeError(f"unknown fetch step {type(fetch).__name__}")


def asset_to_openlineage(asset: Any, lineage_context: Any) -> Any:
    """Provider ``asset-uris`` converter: an ``odf://`` Asset as the same OpenLineage dataset the operators report
    (used for Assets in hand-written inlets and outlets)."""
    from airflow.providers.common.compat.openlineage.facet import Dataset

    parts = urlsplit(asset.uri)
    n = dataset_name(parts.netloc, parts.path.lstrip("/"))
    return Dataset(namespace=n.namespace, name=n.name)
