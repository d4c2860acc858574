# The PostgreSQL service of docker-compose.yaml (and the image of its one-shot db-secrets): Debian's
# PostgreSQL (15 on bookworm) on debian:bookworm-slim, so it builds without a published postgres
# image. docker/postgres-entrypoint.sh does what the official image's entry point does for this
# project: initdb on the first start with the superuser's password from POSTGRES_PASSWORD_FILE, the
# scripts of /docker-entrypoint-initdb.d (docker/postgres-init/) run once against a server that
# listens on its socket only, then the server on all interfaces with password (scram) logins.
# The postgres user is uid 999, as in the official image, which docker/db-secrets.sh gives its files to.
FROM debian:bookworm-slim
ENV PG_MAJOR=15
RUN set -eux; \
    groupadd --system --gid 999 postgres; \
    useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql --shell /bin/bash postgres; \
    mkdir -p /usr/share/man/man1 /usr/share/man/man7; \
    apt-get update; \
    apt-get install -y --no-install-recommends "postgresql-$PG_MAJOR" postgresql-client; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /var/lib/postgresql/data /run/postgresql /docker-entrypoint-initdb.d; \
    chown -R postgres:postgres /var/lib/postgresql /run/postgresql; \
    chmod 700 /var/lib/postgresql/data
ENV PATH=/usr/lib/postgresql/$PG_MAJOR/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY docker/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
USER postgres
VOLUME /var/lib/postgresql/data
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
