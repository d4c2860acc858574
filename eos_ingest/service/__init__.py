"""The one layer the CLI, the DAGs and the Spark job call: open the store, plan, record a backfill, submit, audit, maintain, status, lag alerts, the lag history and the page's trends, verify.

Imports everything below it (quality/, spark/, storage/, formats/, connections/, control/, kafka/, config/, plan/, schema/), never batch/, airflow/ or the CLI."""
