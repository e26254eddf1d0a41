"""The spec's schema evolution rule (Dataset Evolution → Schema Evolution): schemas may only gain columns.

Choices where the spec is silent:

* New columns must come after all existing ones (at the top level and inside structs), so readers that address
  columns by position keep working; existing columns keep their relative order.
* Nullability may change either way: engines (Spark in particular) flip it freely and it is not part of the
  logical hash; a column's values do not change meaning with it.
* Field and schema metadata may change freely; so may the names of list/map item fields (``item``/``element``).
* Anything else is a type change and refused: another type or parameter (``timestamp[ms, tz=UTC]`` vs
  ``timestamp[ms, tz=+00:00]``, ``int32`` vs ``int64``, plain vs dictionary-encoded, ...). Containers (lists, maps,
  dictionaries, run-end encoded) are compared through their items, so a struct nested in a list may gain fields.
"""
from __future__ import annotations

from collections import Counter

import pyarrow as pa

from odf_core.errors import SchemaEvolutionError

__all__ = ["check_schema_evolution"]

_SAME_KIND_CONTAINERS = (
    pa.types.is_list,
    pa.types.is_large_list,
    pa.types.is_list_view,
    pa.types.is_large_list_view,
)


def check_schema_evolution(old: pa.Schema, new: pa.Schema, *, where: str = "") -> None:
    """Raise ``SchemaEvolutionError`` (a ``ChainError``) listing every change from ``old`` to ``new`` not allowed."""
    problems: list[str] = []
    _compare_fields(list(old), list(new), "", problems)
    if problems:
        raise SchemaEvolutionError(where, problems)


def _compare_fields(old: list[pa.Field], new: list[pa.Field], prefix: str, problems: list[str]) -> None:
    old_keyed, new_keyed = _keyed(old), _keyed(new)
    new_by_key = dict(new_keyed)
    old_keys = {key for key, _ in old_keyed}
    for key, f in old_keyed:
        if key not in new_by_key:
            problems.append(f"column {prefix + f.name!r} removed or renamed (was {f.type})")
        else:
            _compare_types(f.type, new_by_key[key].type, prefix + f.name, problems)
    for (name, n), f in new_keyed:
        if n and (name, n) not in old_keys:
            problems.append(f"column {prefix + name!r} added again ({f.type}): column names must stay unique")
    kept_old_order = [key for key, _ in old_keyed if key in new_by_key]
    kept_new_order = [key for key, _ in new_keyed if key in old_keys]
    if kept_old_order != kept_new_order:
        what = f"fields of {prefix[:-1]!r}" if prefix else "columns"
        before, after = ([name for name, _ in keys] for keys in (kept_old_order, kept_new_order))
        problems.append(f"existing {what} reordered: {before} became {after}")
    last_kept = max((i for i, (key, _) in enumerate(new_keyed) if key in old_keys), default=-1)
    for key, f in new_keyed[: max(last_kept, 0)]:
        if key not in old_keys:
            problems.append(
                f"column {prefix + f.name!r} ({f.type}) added before existing column {prefix + new[last_kept].name!r}"
            )


def _keyed(fields: list[pa.Field]) -> list[tuple[tuple[str, int], pa.Field]]:
    """Key fields by (name, occurrence), so that repeated names (legal in Arrow) still match up one to one."""
    seen: Counter[str] = Counter()
    keyed = []
    for f in fields:
        keyed.append(((f.name, seen[f.name]), f))
        seen[f.name] += 1
    return keyed


def _compare_types(old: pa.DataType, new: pa.DataType, path: str, problems: list[str]) -> None:
    t = pa.types
    if t.is_struct(old) and t.is_struct(new):
        _compare_fields(_children(old), _children(new), f"{path}.", problems)
        return
    if any(check(old) and check(new) for check in _SAME_KIND_CONTAINERS) or (
        t.is_fixed_size_list(old) and t.is_fixed_size_list(new) and old.list_size == new.list_size
    ):
        _compare_types(old.value_type, new.value_type, f"{path}[]", problems)
        return
    if t.is_map(old) and t.is_map(new) and old.keys_sorted == new.keys_sorted:
        _compare_types(old.key_type, new.key_type, f"{path}.key", problems)
        _compare_types(old.item_type, new.item_type, f"{path}.value", problems)
        return
    if t.is_dictionary(old) and t.is_dictionary(new) and (old.index_type, old.ordered) == (new.index_type, new.ordered):
        _compare_types(old.value_type, new.value_type, path, problems)
        return
    if t.is_run_end_encoded(old) and t.is_run_end_encoded(new) and old.run_end_type == new.run_end_type:
        _compare_types(old.value_type, new.value_type, path, problems)
        return
    if not old.equals(new):
        problems.append(f"column {path!r} type changed from {old} to {new}")


def _children(struct: pa.StructType) -> list[pa.Field]:
    return [struct.field(i) for i in range(struct.num_fields)]
