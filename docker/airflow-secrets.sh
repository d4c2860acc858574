#!/bin/sh
# The Airflow secrets of docker-compose.yaml, made at the first start by airflow-init into the state
# volume, so that no password or signing key is fixed in the compose file (and so public):
#
#   <folder>/jwt_secret                           the key every component signs and checks its API
#                                                 tokens with (AIRFLOW__API_AUTH__JWT_SECRET_CMD
#                                                 cats it): $AIRFLOW_JWT_SECRET when given, else
#                                                 the file's, else 48 random bytes, base64
#   <passwords file>                              Airflow's simple auth manager's {"admin": "..."}:
#                                                 $EOS_AIRFLOW_ADMIN_PASSWORD when given, else the
#                                                 file's, else a random password
#
# Files are 0600, owned by the user the Airflow containers run as. Nothing secret is printed: the
# message says where the admin password is. Usage: airflow-secrets.sh <folder> <passwords file>
# (tests/unit/test_docker_compose.py runs it in a temporary folder).
set -eu

folder=$1
passwords=$2
umask 077
mkdir -p "$folder" "$(dirname "$passwords")"

random_secret() {  # URL-safe random text, from the kernel's generator
    head -c "$1" /dev/urandom | base64 | tr -d '\n=' | tr '+/' '-_'
}

# Written to a temporary name and renamed: a reader never sees half a secret.
write_secret() {  # <file> <value>
    printf '%s' "$2" > "$1.tmp"
    chmod 600 "$1.tmp"
    mv -f "$1.tmp" "$1"
}

if [ -n "${AIRFLOW_JWT_SECRET:-}" ]; then
    write_secret "$folder/jwt_secret" "$AIRFLOW_JWT_SECRET"
elif [ ! -s "$folder/jwt_secret" ]; then
    write_secret "$folder/jwt_secret" "$(random_secret 48)"
    echo "airflow-secrets: generated the API's JWT signing key in $folder/jwt_secret"
fi

if [ -n "${EOS_AIRFLOW_ADMIN_PASSWORD:-}" ]; then
    password=$EOS_AIRFLOW_ADMIN_PASSWORD
elif [ -s "$passwords" ]; then
    password=
else
    password=$(random_secret 18)
    echo "airflow-secrets: generated the password of user admin; read it with:"
    echo "  docker compose exec airflow-apiserver cat $passwords"
fi
if [ -n "$password" ]; then
    # JSON-escaped by Python (a password may hold quotes or backslashes), never on a command line.
    json=$(EOS_PASSWORD=$password python3 -c 'import json, os; print(json.dumps({"admin": os.environ["EOS_PASSWORD"]}))')
    write_secret "$passwords" "$json"
fi
