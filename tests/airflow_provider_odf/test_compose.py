"""Static checks of the container setup (no Docker engine here): compose structure, Dockerfile, referenced files."""
from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from .conftest import REPO

COMPOSE = REPO / "docker-compose.airflow.yml"
DOCKERFILE = REPO / "Dockerfile"
AIRFLOW_SERVICES = {"airflow-apiserver": "api-server", "airflow-scheduler": "scheduler",
                    "airflow-dag-processor": "dag-processor", "airflow-triggerer": "triggerer"}


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable substitution: ``${VAR:-default}``, ``${VAR}``, ``$$`` for a literal dollar."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(3)
        return env.get(name) or (default if default is not None else "")

    return re.sub(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", sub, text)


def load_compose(env: dict[str, str] | None = None) -> dict:
    return yaml.safe_load(interpolate(COMPOSE.read_text(), env or {}))


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_compose()


def test_services_and_commands(compose):
    services = compose["services"]
    assert set(services) == {"postgres", "airflow-init", *AIRFLOW_SERVICES, "spark-master", "spark-worker"}
    for name, command in AIRFLOW_SERVICES.items():
        s = services[name]
        assert s["command"] == command
        assert s["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert s["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
        assert "healthcheck" in s and "profiles" not in s
    assert services["postgres"]["image"].startswith("postgres:")
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    init = "\n".join(services["airflow-init"]["command"])
    assert "airflow db migrate" in init and "airflow-provider-odf" in init and "init --exist-ok" in init


def test_every_airflow_component_is_built_from_the_dockerfile(compose):
    for name, s in compose["services"].items():
        if name == "postgres":
            continue
        assert s["build"]["dockerfile"] == "Dockerfile"
        assert (COMPOSE.parent / s["build"]["context"] / s["build"]["dockerfile"]).resolve() == DOCKERFILE
        assert s["image"] == "airflow-provider-odf:3.3.2"


def test_airflow_configuration(compose):
    env = compose["services"]["airflow-scheduler"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert "@postgres/" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
    assert compose["services"]["airflow-apiserver"]["ports"] == ["8080:8080"]
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "false"


@pytest.mark.parametrize("spark_conn, master", [(None, "local[*]"), ("spark_standalone", "spark://spark-master:7077")])
def test_connections_resolve_through_the_hook(monkeypatch, spark_conn, master):
    """The containers' AIRFLOW_CONN_* values, as the hook reads them (with and without the Spark cluster)."""
    from airflow_provider_odf.hooks.odf import OdfHook

    services = load_compose({"ODF_SPARK_CONN_ID": spark_conn} if spark_conn else {})["services"]
    for name, value in services["airflow-scheduler"]["environment"].items():
        if name.startswith("AIRFLOW_CONN_"):
            monkeypatch.setenv(name, value)
    hook = OdfHook("odf_default")
    assert hook.settings().workspace == "/opt/airflow/odf/.odf"
    spark = hook.spark_settings()
    assert spark.master == master
    if spark_conn:
        # Executors call the driver back by the scheduler's host name (LocalExecutor runs tasks there).
        assert spark.conf["spark.driver.host"] == services["airflow-scheduler"]["hostname"] == "airflow-scheduler"


def test_volumes_and_mounted_files_exist(compose):
    declared = set(compose["volumes"])
    for name, s in compose["services"].items():
        for v in s.get("volumes", []):
            source, target = v.split(":")[:2]
            if source.startswith("."):
                assert (COMPOSE.parent / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
    mounts = compose["services"]["airflow-dag-processor"]["volumes"]
    assert "./dags_examples:/opt/airflow/dags" in mounts
    for f in ("odf_dags.py", "odf-dags.yaml", "datasets/cities.yaml"):
        assert (REPO / "dags_examples" / f).is_file()
    workspace = {v for s in ("airflow-scheduler", "spark-worker") for v in compose["services"][s]["volumes"]
                 if v.startswith("odf-workspace:")}
    assert workspace == {"odf-workspace:/opt/airflow/odf"}  # driver and executors see one workspace path


def test_spark_services_sit_behind_the_profile(compose):
    master, worker = compose["services"]["spark-master"], compose["services"]["spark-worker"]
    for s in (master, worker):
        assert s["profiles"] == ["spark"]
        assert s["entrypoint"][-1] == "spark-class"
    assert master["command"][0] == "org.apache.spark.deploy.master.Master"
    assert worker["command"][:2] == ["org.apache.spark.deploy.worker.Worker", "spark://spark-master:7077"]
    assert "7077" in master["command"]


def test_dockerfile_installs_java_and_the_package():
    text = DOCKERFILE.read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert lines[0] == "FROM apache/airflow:3.3.2-python3.11"
    assert "openjdk-17-jre-headless" in text and "ENV JAVA_HOME=" in text
    assert lines[-1].startswith("WORKDIR") and [ln for ln in lines if ln.startswith("USER")][-1] == "USER airflow"
    copied = set()
    for line in lines:
        if line.startswith("COPY"):
            copied.update(p for p in line.split()[1:-1] if not p.startswith("--"))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert {"pyproject.toml", project["project"]["readme"], *packages} <= copied
    for path in copied:
        assert (REPO / path).exists(), path
    install = next(ln for ln in lines if "pip install" in ln)
    extras = re.search(r'"\.\[([a-z0-9,]+)\]"', install).group(1).split(",")
    assert set(extras) <= set(project["project"]["optional-dependencies"]) and "spark" in extras
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in install


def test_dockerignore_keeps_the_venv_out():
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv", ".git", "build"} <= set(ignored)
