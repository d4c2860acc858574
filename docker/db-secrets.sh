#!/bin/sh
# The PostgreSQL passwords of docker-compose.yaml, made at the first start by the one-shot service
# db-secrets into the volume db-secrets, so that no database password is fixed in the compose file
# (and so public). Kept across restarts; `docker compose down -v` deletes them with the databases.
#
#   <folder>/postgres/postgres_password   the superuser's   (POSTGRES_PASSWORD_FILE)        owner
#   <folder>/postgres/airflow_password    role airflow's    (docker/postgres-init/)          postgres
#   <folder>/postgres/eos_password        role eos's        (docker/postgres-init/)
#   <folder>/airflow/pgpass               libpq's password file (PGPASSFILE) of the Airflow     owner
#                                         containers: role airflow for database airflow, role  airflow
#                                         eos for eos_control; their URLs carry no password
#
# Each password is 24 random bytes, URL-safe base64. Folders are 0700 and files 0600, owned (when
# run as root) by the user that reads them: postgres (uid 999 in the postgres image) and airflow
# (AIRFLOW_UID, 50000 in Airflow's image), so the Airflow containers cannot read the superuser's
# password. Nothing secret is printed. Usage: db-secrets.sh <folder>
# (tests/unit/test_docker_compose.py runs it in a temporary folder).
set -eu

folder=$1
postgres_uid=${POSTGRES_UID:-999}
airflow_uid=${AIRFLOW_UID:-50000}
umask 077
mkdir -p "$folder/postgres" "$folder/airflow"

random_secret() {  # URL-safe random text, from the kernel's generator (no character needs quoting)
    head -c "$1" /dev/urandom | base64 | tr -d '\n=' | tr '+/' '-_'
}

# Written to a temporary name and renamed: a reader never sees half a secret.
write_secret() {  # <file> <value>
    printf '%s' "$2" > "$1.tmp"
    chmod 600 "$1.tmp"
    mv -f "$1.tmp" "$1"
}

for name in postgres airflow eos; do
    file="$folder/postgres/${name}_password"
    if [ ! -s "$file" ]; then
        write_secret "$file" "$(random_secret 24)"
        echo "db-secrets: generated the password of PostgreSQL role $name in $file"
    fi
done

# host:port:database:user:password, one line per URL of docker-compose.yaml; rewritten every start
# from the passwords above, so it always matches what the database was initialised with.
write_secret "$folder/airflow/pgpass" "$(printf 'postgres:5432:airflow:airflow:%s\npostgres:5432:eos_control:eos:%s' \
    "$(cat "$folder/postgres/airflow_password")" "$(cat "$folder/postgres/eos_password")")"

if [ "$(id -u)" = 0 ]; then
    chown -R "$postgres_uid" "$folder/postgres"
    chown -R "$airflow_uid" "$folder/airflow"
fi
