"""Definition problems as DAGs: a broken snapshot stays visible where its DAG is, without an import error.

An import error would cost every DAG of the file: Airflow's dag-processor marks all DAGs of a file that fails to
import as stale, and stale DAGs are no longer scheduled. So a problem the factory finds becomes a small DAG instead:

* ``odf__<dataset>`` — the id the dataset's DAG has (or would have) — when the problem belongs to one dataset whose
  name can be read: its history, pause state and alerts stay where its users look, and fixing the YAML turns it
  back into the real DAG;
* ``odf__definition_errors`` for the others (a file without a readable name, a settings entry for no dataset, a
  name reserved for the factory's own DAGs).

Its only task, ``definition_error``, fails (without retries) with the problem: ``FILE:LINE: property.path: problem
(got VALUE)``; the DAG's description and docs show it too, without a run. It runs on the folder's sync schedule
(``sync_schedule``, or ``schedule`` with ``whole_graph``): a definition problem is something the sync cannot apply,
so it fails as often as the sync would try. Like every new DAG it starts paused unless the deployment says otherwise;
a dataset DAG that was running keeps running — and now fails, which is the point.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import DAG, BaseOperator
from airflow.sdk.exceptions import AirflowFailException

if TYPE_CHECKING:
    from airflow.sdk import Context

TASK_ID = "definition_error"
TAG = "odf-definition-error"
_START = datetime(2024, 1, 1, tzinfo=timezone.utc)


class OdfDefinitionErrorOperator(BaseOperator):
    """Fails with the definition problems of its DAG (one line each); retrying cannot fix a YAML file."""

    ui_color = "#fecaca"

    def __init__(self, *, problems: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "retries": 0})
        self.problems = list(problems)

    def execute(self, context: "Context") -> None:
        for p in self.problems:
            self.log.error("ODF definition problem: %s", p)
        if len(self.problems) == 1:
            raise AirflowFailException(self.problems[0])
        raise AirflowFailException(f"{len(self.problems)} problems: " + " | ".join(self.problems))


def problem_dag(dag_id: str, problems: Sequence[str], *, schedule: str | None, owner: str,
                folder: str) -> DAG:
    """The DAG that stands for a broken definition (see the module docs)."""
    first = problems[0] if len(problems) == 1 else f"{len(problems)} problems, the first: {problems[0]}"
    doc = "\n".join([f"**Broken ODF definition** in `{folder}`: nothing of it is scheduled until it is fixed.", "",
                     *(f"- `{p}`" for p in problems)])
    with DAG(dag_id, schedule=schedule, start_date=_START, catchup=False, max_active_runs=1, auto_register=False,
             description=f"Broken ODF definition: {first}"[:1000], doc_md=doc, tags=["odf", TAG],
             default_args={"owner": owner}) as dag:
        OdfDefinitionErrorOperator(task_id=TASK_ID, problems=problems)
    return dag
