"""A small dataset graph for runs through Airflow: CSV roots served over HTTP and one derivative.

``<p>.cities`` (Url, Snapshot merge) → ``<p>.big-cities`` (filter, in a subfolder), ``<p>.flaky`` (Url, Append
merge) whose server can be told to fail, and ``<p>.ratings`` (push source, NDJSON). Expected results are computed
from the data text, never written down twice.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

CITIES_CSV = """city,country,population
Amsterdam,NL,921402
Berlin,DE,3755251
Lisbon,PT,545923
Madrid,ES,3332035
Vienna,AT,1982097
Oslo,NO,709037
"""
FLAKY_CSV = """id,reading
1,alpha
2,beta
3,gamma
4,delta
"""
RATINGS_NDJSON = """{"event_time": "2024-01-01T10:00:00Z", "city": "Berlin", "rating": 5}
{"event_time": "2024-01-01T11:00:00Z", "city": "Lisbon", "rating": 4}
{"event_time": "2024-01-01T12:00:00Z", "city": "Oslo", "rating": 2}
"""
BIG = 1_000_000
DAG_FILE = 'from airflow_provider_odf.dag_factory import dags_from_folder\n\ndags_from_folder("datasets", globals())\n'

_ROOT = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: {url}
        eventTime:
          kind: FromMetadata
      read:
        kind: Csv
        header: true
        schema: [{schema}]
      merge:
{merge}
"""
_PUSH = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read:
        kind: NdJson
        schema: ["event_time TIMESTAMP", "city STRING", "rating INT"]
      merge:
        kind: Append
"""
_DERIVATIVE = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {input}
          alias: cities
      transform:
        kind: Sql
        engine: spark
        query: |
          select event_time, city, population from cities where population >= {big}
"""


@dataclass(frozen=True)
class SmallGraph:
    cities: str
    big_cities: str
    flaky: str
    ratings: str

    @staticmethod
    def dag_id(name: str) -> str:
        return "odf__" + name.replace(".", "_").replace("-", "_")


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def big_cities(text: str = CITIES_CSV) -> set[str]:
    return {r["city"] for r in rows(text) if int(r["population"]) >= BIG}


def write_served_files(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cities.csv").write_text(CITIES_CSV, encoding="utf-8")
    (folder / "flaky.csv").write_text(FLAKY_CSV, encoding="utf-8")
    (folder / "ratings.ndjson").write_text(RATINGS_NDJSON, encoding="utf-8")
    return folder


def write_dag_folder(folder: Path, base_url: str, sidecar: str, *, prefix: str = "t",
                     with_flaky: bool = True, with_push: bool = False) -> SmallGraph:
    """The DAG file, its ``odf-dags.yaml`` and the snapshots in ``folder/datasets``."""
    g = SmallGraph(f"{prefix}.cities", f"{prefix}.big-cities", f"{prefix}.flaky", f"{prefix}.ratings")
    snaps = folder / "datasets"
    snaps.mkdir(parents=True, exist_ok=True)
    (snaps / "cities.yaml").write_text(_ROOT.format(
        name=g.cities, url=f"{base_url}/cities.csv", schema='"city STRING", "country STRING", "population BIGINT"',
        merge="        kind: Snapshot\n        primaryKey: [city]"), encoding="utf-8")
    (snaps / "derived").mkdir(exist_ok=True)  # snapshots in subfolders get DAGs and datasets too
    (snaps / "derived" / "big-cities.yaml").write_text(
        _DERIVATIVE.format(name=g.big_cities, input=g.cities, big=BIG), encoding="utf-8")
    if with_flaky:
        (snaps / "flaky.yaml").write_text(_ROOT.format(
            name=g.flaky, url=f"{base_url}/flaky.csv", schema='"id BIGINT", "reading STRING"',
            merge="        kind: Append"), encoding="utf-8")
    if with_push:
        (snaps / "ratings.yaml").write_text(_PUSH.format(name=g.ratings), encoding="utf-8")
    (folder / "odf-dags.yaml").write_text(sidecar, encoding="utf-8")
    (folder / "odf_dags.py").write_text(DAG_FILE, encoding="utf-8")
    return g
