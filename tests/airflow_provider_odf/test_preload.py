"""``airflow_provider_odf.preload`` from ``airflow_local_settings.py``: Airflow imports it at start-up, so processes it
forks for tasks start with the provider loaded, and nothing fork-unsafe (threads, gRPC, Spark) exists yet."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from airflow_provider_odf.preload import MODULES

PROBE = textwrap.dedent("""
    import json, sys, threading
    import airflow  # Airflow's settings import airflow_local_settings from $AIRFLOW_HOME/config
    print(json.dumps({"loaded": sorted(m for m in sys.argv[1:] if m in sys.modules),
                      "threads": [t.name for t in threading.enumerate()],
                      "unsafe": sorted(m for m in sys.modules if m.split(".")[0] in ("grpc", "pyspark", "py4j"))}))
""")


def probe(home) -> dict:
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    done = subprocess.run([sys.executable, "-c", PROBE, *MODULES], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_airflow_local_settings_preloads_the_provider_and_nothing_fork_unsafe(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "airflow_local_settings.py").write_text("import airflow_provider_odf.preload  # noqa\n")
    got = probe(tmp_path)
    assert got["loaded"] == sorted(MODULES)
    assert got["unsafe"] == [] and got["threads"] == ["MainThread"], got


def test_without_it_airflow_does_not_load_the_provider(tmp_path):
    # the control: the modules above are there because of the settings file, not because Airflow loads providers
    got = probe(tmp_path)
    assert "airflow_provider_odf.operators.ingest" not in got["loaded"], got
