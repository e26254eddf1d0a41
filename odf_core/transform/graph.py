"""The order of datasets in the graph: each derivative after its inputs (``odf pull --recursive``)."""
from __future__ import annotations

from odf_core.workspace import DatasetHandle, Workspace

from odf_core.transform.errors import TransformError
from odf_core.transform.planning import input_handle


def upstream_order(ws: Workspace, names: list[str]) -> list[str]:
    """The named datasets and everything upstream of them, inputs first."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(h: DatasetHandle, trail: tuple[str, ...]) -> None:
        key = str(h.name).lower()
        if key in seen:
            return
        if key in trail:
            raise TransformError(f"dataset dependency cycle: {' -> '.join(trail + (key,))}")
        st = h.state()
        if st.transform is not None:
            for inp in st.transform.inputs:
                visit(input_handle(ws, inp.dataset_ref, str(h.name)), trail + (key,))
        seen.add(key)
        order.append(str(h.name))

    for n in names:
        visit(ws.get(n), ())
    return order
