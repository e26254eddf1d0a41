"""The ODF view in a real ``airflow api-server`` (one per module), driven by Playwright in Debian's Chromium.

The workspace holds ``t.src`` → ``t.derived`` with data (committed without Spark by ``chains.build``); the DAG folder
generates their DAGs, so Airflow knows which DAG produces each Asset, and one ``airflow dags test`` of the derivative
(transform marked successful, verify really run) leaves a verification and an extra link behind. Screenshots go to
``build/screenshots/`` for a person to look at.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from dags_examples.demo_support.standalone import free_port

from ..conftest import copy_migrated_db
from ..lineage.chains import DERIVED, ROOT, build

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
SHOTS = REPO / "build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
# Headless Chromium as root on a machine without internet: no sandbox, no background connections.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
USER, PASSWORD = "admin", "odf-ui-test"
DAG_FILE = 'from airflow_provider_odf.dag_factory import dags_from_folder\n\ndags_from_folder("datasets", globals())\n'
SIDECAR = "defaults:\n  schedule: null\n  sync_schedule: null\n  sensor: none\n  retries: 0\n"


@dataclass
class Server:
    url: str
    home: Path
    root_head: str
    derived_head: str

    def token(self) -> str:
        r = httpx.post(f"{self.url}/auth/token", json={"username": USER, "password": PASSWORD}, timeout=30)
        r.raise_for_status()
        return r.json()["access_token"]


def _airflow(env: dict[str, str], *args: str, timeout: float = 300) -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "airflow"), *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])


@pytest.fixture(scope="module")
def server(tmp_path_factory, migrated_airflow_db):
    tmp = tmp_path_factory.mktemp("odf-ui")
    home = tmp / "airflow"
    graph = build(tmp / "data")
    dags = home / "dags"
    (dags / "datasets").mkdir(parents=True)
    (dags / "datasets" / "src.yaml").write_text(ROOT, encoding="utf-8")
    (dags / "datasets" / "derived.yaml").write_text(DERIVED, encoding="utf-8")
    (dags / "odf-dags.yaml").write_text(SIDECAR, encoding="utf-8")
    (dags / "odf_dags.py").write_text(DAG_FILE, encoding="utf-8")
    (home / "passwords.json").write_text(json.dumps({USER: PASSWORD}), encoding="utf-8")
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW_CONN_ODF_DEFAULT": json.dumps({"conn_type": "odf", "extra": {"workspace": graph.ws.url}}),
    }
    copy_migrated_db(migrated_airflow_db, home)  # the session's `airflow db migrate`, copied
    _airflow(env, "dags", "reserialize")
    # a verification to show (the transform is marked successful: its block is already in the chain)
    _airflow(env, "dags", "test", "odf__t_derived", "--mark-success-pattern", "transform")
    log = open(tmp / "api-server.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "api-server", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp / "api-server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/api/v2/monitor/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "api-server did not come up in 120 s"
            time.sleep(0.5)  # polling a starting server, not waiting for a result
        yield Server(url, home, graph.root_block, graph.derived_block)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium; .ci/run does)")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    """A logged-in page: Airflow's own login form, reached by opening /odf/ without a session."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(30_000)
    p.goto(f"{server.url}/odf/")
    assert "/auth/login" in p.url
    p.fill("input[name=username]", USER)
    p.fill("input[name=password]", PASSWORD)
    p.click("button:has-text('Sign in')")
    p.wait_for_url("**/odf/")
    yield p
    ctx.close()


def test_pages_require_airflow_login(server):
    assert httpx.get(f"{server.url}/odf/", timeout=30).status_code == 401
    r = httpx.get(f"{server.url}/odf/datasets/t.src", headers={"Accept": "text/html"}, timeout=30)
    assert r.status_code == 303 and r.headers["location"].startswith("/auth/login?next=")
    assert httpx.get(f"{server.url}/odf/", headers={"Authorization": "Bearer not-a-token"},
                     timeout=30).status_code in (401, 403)
    ok = httpx.get(f"{server.url}/odf/", headers={"Authorization": f"Bearer {server.token()}"}, timeout=30)
    assert ok.status_code == 200 and 'data-dataset="t.src"' in ok.text


def test_bad_requests_are_one_line_errors(server):
    auth = {"Authorization": f"Bearer {server.token()}"}
    r = httpx.get(f"{server.url}/odf/datasets/nope", headers=auth, timeout=30)
    assert r.status_code == 404 and "dataset &#39;nope&#39; does not exist" in r.text
    r = httpx.get(f"{server.url}/odf/?conn=missing", headers=auth, timeout=30)
    assert r.status_code == 400 and "odf connection &#39;missing&#39; is not defined" in r.text
    r = httpx.get(f"{server.url}/odf/datasets/t.src?blocks=0", headers=auth, timeout=30)
    assert r.status_code == 400 and "blocks:" in r.text and "Traceback" not in r.text


def test_datasets_page_lists_the_workspace(page, server):
    rows = page.locator("#datasets tbody tr")
    assert rows.count() == 2
    src = page.locator('tr[data-dataset="t.src"]')
    assert src.locator("td.hash").get_attribute("title") == server.root_head
    assert "Root" in src.inner_text() and "odf__t_src" in src.inner_text()
    derived = page.locator('tr[data-dataset="t.derived"]')
    assert "success" in derived.inner_text() and "odf__t_derived" in derived.inner_text()
    page.screenshot(path=str(SHOTS / "odf-datasets.png"), full_page=True)


def test_click_through_from_the_nav_to_a_chain_and_its_lineage(page, server):
    page.goto(f"{server.url}/")
    page.wait_for_load_state("networkidle")  # the nav is built from the plugin list fetched after the first paint
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="ODF datasets").click()
    # the UI opens /plugin/odf, then mirrors the iframe's path into its own URL once the frame loads
    # (/plugin/odf/odf/): on a busy machine that happens before the wait starts, so either URL is the page
    page.wait_for_url(re.compile(r"/plugin/odf(/odf/)?$"))
    frame = page.frame_locator("iframe")
    frame.locator("a.dataset-link", has_text="t.src").click()
    chain = frame.locator("#chain-table")
    chain.wait_for()
    head_row = chain.locator("tbody tr").first
    assert head_row.get_attribute("data-block") == server.root_head
    assert "AddData" in head_row.inner_text() and "offsets 0..4 (5 records)" in head_row.inner_text()
    assert frame.locator("#schema-table").inner_text().count("int64") >= 2
    assert frame.locator("#records-table tbody tr").count() == 5
    page.wait_for_url("**/plugin/odf/odf/datasets/t.src?conn=odf_default")  # a deep link: the frame in the URL
    page.screenshot(path=str(SHOTS / "odf-dataset-root-in-airflow.png"), full_page=True)

    frame.locator('svg.lineage a[data-dataset="t.derived"]').click()  # down the lineage graph
    frame.locator("#dataset-name", has_text="t.derived").wait_for()
    transform = frame.locator("#chain-table tbody tr").first
    assert transform.get_attribute("data-block") == server.derived_head
    assert "ExecuteTransform" in transform.inner_text()
    assert f"t.src 0..4 @ {server.root_head[-10:]}" in transform.inner_text()
    assert frame.locator('svg.lineage path.edge[data-from="t.src"][data-to="t.derived"]').count() == 1
    page.screenshot(path=str(SHOTS / "odf-dataset-derivative-in-airflow.png"), full_page=True)


def test_operator_extra_link_opens_the_dataset_page(page, server):
    auth = {"Authorization": f"Bearer {server.token()}"}
    (run,) = httpx.get(f"{server.url}/api/v2/dags/odf__t_derived/dagRuns", headers=auth, timeout=30).json()["dag_runs"]
    links = httpx.get(f"{server.url}/api/v2/dags/odf__t_derived/dagRuns/{run['dag_run_id']}/taskInstances/verify/links",
                      headers=auth, timeout=30).json()
    link = links["extra_links"]["ODF dataset"]  # pushed to XCom by the task, as Airflow 3 does for every link
    assert link == f"{server.url}/odf/datasets/t.derived?conn=odf_default"
    page.goto(link)
    page.locator("#dataset-name", has_text="t.derived").wait_for()
    assert page.locator("#head").inner_text() == server.derived_head
    assert "success" in page.locator(".facts").inner_text()  # the verification that dags test ran
    page.screenshot(path=str(SHOTS / "odf-dataset-from-extra-link.png"), full_page=True)
