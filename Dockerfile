# Airflow 3.3.2 + Java 17 (Spark's JVM) + this package (odf_core, the Airflow provider, the Spark jobs).
# Used by docker-compose.airflow.yml for every Airflow component and, with the `spark` profile, a Spark standalone
# master and worker (`spark-class` from the same pyspark install), so driver and executors run identical code.
FROM apache/airflow:3.3.2-python3.11

USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && ln -sfn "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17 \
 && apt-get autoremove -yqq --purge \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17
# Mount points of the workspace and source-data volumes: a new named volume takes this ownership (group 0 and
# group-writable, so any AIRFLOW_UID works, as in the official image).
RUN mkdir -p /opt/airflow/odf /opt/airflow/data \
 && chown -R airflow:0 /opt/airflow/odf /opt/airflow/data \
 && chmod -R g+rwX /opt/airflow/odf /opt/airflow/data

USER airflow
WORKDIR /opt/odf-src
COPY --chown=airflow:root pyproject.toml README.md ./
COPY --chown=airflow:root odf_core ./odf_core
COPY --chown=airflow:root airflow_provider_odf ./airflow_provider_odf
COPY --chown=airflow:root spark_jobs ./spark_jobs
# apache-airflow pinned alongside, as the image's docs ask, so pip never swaps the Airflow version; the [spark]
# extra pins pyspark to the pyspark-client version the Spark provider pulls in (same package directory).
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" ".[spark,airflow,s3]" \
 && python -c "import pyspark, airflow_provider_odf, odf_core; print('pyspark', pyspark.__version__)" \
 && python -c "import glob, os, pyspark; jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), 'jars', 'spark-core_*.jar')); assert jars and all(pyspark.__version__ in j for j in jars), (pyspark.__version__, jars)" \
 && java -version
# task processes fork with the provider already imported (docs/install-airflow.md, "Faster tasks")
RUN mkdir -p /opt/airflow/config \
 && echo "import airflow_provider_odf.preload  # noqa: F401" > /opt/airflow/config/airflow_local_settings.py
WORKDIR /opt/airflow
