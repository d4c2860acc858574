-- Run once by the postgres image, on the first start of an empty data volume (docker-compose.yaml
-- mounts this folder at /docker-entrypoint-initdb.d). Two databases, each owned by its own role:
--   airflow      Airflow's metadata  (AIRFLOW__DATABASE__SQL_ALCHEMY_CONN in docker-compose.yaml)
--   eos_control  eos-ingest's control tables: offsets, batches, ranges  (EOS_CONTROL_DB_URL)
-- To apply a change here, drop the volume: `docker compose down -v`.
-- The passwords are for a database that only the compose network can reach; no port is published.
CREATE ROLE airflow LOGIN PASSWORD 'airflow';
CREATE DATABASE airflow OWNER airflow;

CREATE ROLE eos LOGIN PASSWORD 'eos';
CREATE DATABASE eos_control OWNER eos;
