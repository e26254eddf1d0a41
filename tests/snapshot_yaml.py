"""Root dataset snapshots for tests, as the YAML a user writes: one builder instead of a literal per test file."""
from __future__ import annotations


def root_snapshot(name: str, read: str, merge: str, *, fetch: str | None = None, push: str | None = None) -> str:
    """A ``DatasetSnapshot`` of a root dataset: a polling source (``fetch``: its flow-style YAML) or a push source
    named ``push``; ``read`` and ``merge`` are flow-style YAML mappings."""
    assert (fetch is None) != (push is None), "a polling source (fetch) or a push source (push)"
    source = (f"    - kind: SetPollingSource\n      fetch: {fetch}\n" if fetch is not None else
              f"    - kind: AddPushSource\n      sourceName: {push}\n")
    return (f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: Root\n  metadata:\n{source}"
            f"      read: {read}\n      merge: {merge}\n")
