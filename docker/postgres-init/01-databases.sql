-- Run once by the postgres image, on the first start of an empty data volume (docker-compose.yaml
-- mounts this folder at /docker-entrypoint-initdb.d). Two databases, each owned by its own role:
--   airflow      Airflow's metadata  (AIRFLOW__DATABASE__SQL_ALCHEMY_CONN in docker-compose.yaml)
--   eos_control  eos-ingest's control tables: offsets, batches, ranges  (EOS_CONTROL_DB_URL)
-- To apply a change here, drop the volume: `docker compose down -v`.
-- The passwords are the ones the service db-secrets generated at the first start (docker/db-secrets.sh):
-- psql reads each file into a variable (\set with a backquoted command) and quotes it as a literal
-- (:'name'), so no password is written here nor on a command line.
\set airflow_password `cat /run/eos-db-secrets/postgres/airflow_password`
\set eos_password `cat /run/eos-db-secrets/postgres/eos_password`

CREATE ROLE airflow LOGIN PASSWORD :'airflow_password';
CREATE DATABASE airflow OWNER airflow;

CREATE ROLE eos LOGIN PASSWORD :'eos_password';
CREATE DATABASE eos_control OWNER eos;
