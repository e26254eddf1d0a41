"""The ODF view: a FastAPI app the Airflow api-server mounts at ``/odf`` (see :mod:`airflow_provider_odf.plugins`).

``/odf/`` lists the datasets of a workspace, ``/odf/datasets/<name>`` shows one (chain, schema, lineage, recent
records). The workspace is the one of an ``odf`` connection (``?conn=``, default ``odf_default``); ``?ns=`` is the
Asset namespace when a DAG folder set one. Airflow does not authenticate plugin apps: every page requires Airflow's
own login (its JWT, as a bearer token or the UI's cookie) and permission to read Assets; a browser without a login
is sent to Airflow's login page and back.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from airflow_provider_odf.hooks.odf import OdfHook

log = logging.getLogger(__name__)
TEMPLATES = Path(__file__).parent / "templates"
ICON = Path(__file__).parent / "static" / "odf.svg"
DEFAULT_CONN = OdfHook.default_conn_name


class Page:
    """Links and rendering of one request (absolute paths from the mount point, so any prefix works)."""

    def __init__(self, request: Request, conn: str, ns: str | None) -> None:
        self.request = request
        self.conn = conn
        self.ns = ns
        self.root = request.scope.get("root_path", "").rstrip("/")  # .../odf
        self.airflow = self.root.rpartition("/")[0]  # the Airflow UI's own root

    def _query(self, **more: Any) -> str:
        q = {"conn": self.conn, **({"ns": self.ns} if self.ns else {}), **{k: v for k, v in more.items() if v}}
        return urlencode(q)

    def index_url(self) -> str:
        return f"{self.root}/?{self._query()}"

    def dataset_url(self, name: str, **more: Any) -> str:
        return f"{self.root}/datasets/{quote(name, safe='')}?{self._query(**more)}"

    def dag_url(self, dag_id: str) -> str:
        return f"{self.airflow}/dags/{quote(dag_id, safe='')}"

    def ti_url(self, dag_id: str, run_id: str, task_id: str) -> str:
        return f"{self.airflow}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/tasks/" \
               f"{quote(task_id, safe='')}"

    @property
    def asset_namespace(self) -> str:
        return self.ns or self.conn.lower()

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = _env().get_template(template).render(page=self, **values)
        return HTMLResponse(html, status_code=status)

    def error(self, status: int, message: str) -> HTMLResponse:
        return self.render("error.html", status=status, message=message)


_ENV = None


def _env() -> Any:
    global _ENV
    if _ENV is None:
        import jinja2

        from airflow_provider_odf.plugins.views import short

        _ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                                  undefined=jinja2.StrictUndefined)
        _ENV.filters["short"] = short
        _ENV.filters["bytes"] = _human_bytes
    return _ENV


def _human_bytes(n: int | None) -> str:
    if n is None:
        return "—"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _workspace(conn: str) -> Any:
    return OdfHook(conn).get_workspace()


def _guard(page: Page, fn: Any) -> HTMLResponse:
    """A clear one-line error page for what the user can fix (connection, name); nothing of a trace leaks."""
    from odf_core.errors import DatasetNotFound, OdfError

    try:
        return fn()
    except DatasetNotFound as e:
        return page.error(404, str(e))
    except OdfError as e:
        return page.error(400, str(e))
    except Exception:
        log.exception("ODF view: %s failed", page.request.url.path)
        return page.error(500, "Internal error while reading the workspace (details are in the api-server log).")


def _index(page: Page) -> HTMLResponse:
    from airflow_provider_odf.plugins.airflow_meta import airflow_info
    from airflow_provider_odf.plugins.views import dataset_rows

    ws = _workspace(page.conn)
    rows = dataset_rows(ws)
    info = airflow_info(page.asset_namespace, [r.name for r in rows])
    return page.render("index.html", rows=rows, info=info, workspace=ws.url)


def _dataset(page: Page, name: str, blocks: int, records: int) -> HTMLResponse:
    from airflow_provider_odf.plugins import graph_svg
    from airflow_provider_odf.plugins.airflow_meta import AirflowInfo, airflow_info
    from airflow_provider_odf.plugins.views import chain_entries, dataset_detail, lineage_graph, recent_records

    ws = _workspace(page.conn)
    handle = ws.get(name)
    detail = dataset_detail(handle)
    entries, more = chain_entries(ws, handle, blocks)
    graph = lineage_graph(ws, str(handle.name))
    svg = graph_svg.render(graph, lambda n: page.dataset_url(n))
    recs = recent_records(handle, records)
    info = airflow_info(page.asset_namespace, [detail.row.name]).get(detail.row.name, AirflowInfo())
    return page.render("dataset.html", d=detail, entries=entries, more=more, blocks=blocks, svg=svg, graph=graph,
                       records=recs, n_records=records, info=info, workspace=ws.url)


def create_app() -> FastAPI:
    from fastapi.exceptions import RequestValidationError

    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import get_user

    async def require_asset_reader(user: Any = Depends(get_user)) -> None:
        """Airflow's user (bearer token or the UI's cookie, as for Airflow's own API), allowed to read Assets."""
        if not get_auth_manager().is_authorized_asset(method="GET", user=user):
            raise HTTPException(status_code=403, detail="reading ODF datasets needs permission to read Assets")

    app = FastAPI(title="Open Data Fabric datasets", docs_url=None, redoc_url=None, openapi_url=None)
    pages = APIRouter(dependencies=[Depends(require_asset_reader)])

    @pages.get("/", response_class=HTMLResponse)
    def index(request: Request, conn: str = Query(DEFAULT_CONN, max_length=250),
              ns: str | None = Query(None, max_length=250)) -> HTMLResponse:
        page = Page(request, conn, ns)
        return _guard(page, lambda: _index(page))

    @pages.get("/datasets/{name}", response_class=HTMLResponse)
    def dataset(request: Request, name: str, conn: str = Query(DEFAULT_CONN, max_length=250),
                ns: str | None = Query(None, max_length=250), blocks: int = Query(50, ge=1, le=5000),
                records: int = Query(20, ge=0, le=1000)) -> HTMLResponse:
        page = Page(request, conn, ns)
        return _guard(page, lambda: _dataset(page, name, blocks, records))

    @app.get("/icon.svg", include_in_schema=False)
    def icon() -> Response:  # the nav entry's icon: no data, no login needed
        return Response(ICON.read_bytes(), media_type="image/svg+xml")

    app.include_router(pages)

    def _page(request: Request) -> Page:
        return Page(request, request.query_params.get("conn", DEFAULT_CONN), request.query_params.get("ns"))

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 401 and "text/html" in request.headers.get("accept", ""):
            return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status_code=303)
        return _page(request).error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "query")
        return _page(request).error(400, f"{where}: {first.get('msg', 'invalid value')} "
                                         f"(got {first.get('input')!r})")

    return app
