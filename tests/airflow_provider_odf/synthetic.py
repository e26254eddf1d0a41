"""Synthetic snapshot folders (a layered dataset graph) for parse-time tests and the parse benchmark."""
from __future__ import annotations

import random
from pathlib import Path

ROOT_POLL = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: /data/{name}/*.csv
      read:
        kind: Csv
        header: true
        schema: ["id BIGINT", "event_time TIMESTAMP", "value DOUBLE"]
      merge:
        kind: Ledger
        primaryKey: [id]
    - kind: SetInfo
      description: Synthetic root {i}.
"""
ROOT_PUSH = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read:
        kind: NdJson
        schema: ["event_time TIMESTAMP", "value DOUBLE"]
      merge:
        kind: Append
"""
DERIVATIVE = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
{inputs}
      transform:
        kind: Sql
        engine: spark
        query: |
          select * from {first}
"""


def write_snapshots(folder: Path, n: int, seed: int = 7) -> list[str]:
    """``n`` snapshot files: a third roots (1 in 5 of them push-only), the rest derivatives of 1-3 earlier
    datasets. Returns the dataset names in creation order (inputs first)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    for i in range(n):
        name = f"org.synthetic.ds-{i:04d}"
        if i < 3 or rng.random() < 1 / 3:
            text = (ROOT_PUSH if rng.random() < 0.2 else ROOT_POLL).format(name=name, i=i)
        else:
            inputs = rng.sample(names, k=min(len(names), rng.randint(1, 3)))
            lines = "\n".join(f"        - datasetRef: {x}\n          alias: in{j}" for j, x in enumerate(inputs))
            text = DERIVATIVE.format(name=name, inputs=lines, first="in0")
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")
        names.append(name)
    return names
