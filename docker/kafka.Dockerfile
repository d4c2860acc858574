# The Kafka service of docker-compose.yaml: Apache Kafka from the same Maven artifacts as the local
# broker (jvm/kafka-broker/pom.xml: the broker jar and the log4j2 binding, fetched from Maven
# Central), on Debian's Java 17, one KRaft node. Built from debian:bookworm-slim only, so it builds
# wherever Debian's packages and Maven Central are reachable, without a published Kafka image.
# docker/kafka-start.sh turns the KAFKA_* variables of docker-compose.yaml into server.properties (the
# apache/kafka image's convention, which tests/unit/test_docker_compose.py checks against
# stack/server.properties.in), formats the data folder once and starts the broker.
# Build context: the repository root; kafka.Dockerfile.dockerignore sends only the files used here.

# ---- jars: Maven runs here only, so neither Maven nor its download cache reach the final image ----
FROM debian:bookworm-slim AS jars
# Extra CAs (docker/ca-certificates/README.md): trusted by Maven once ca-certificates-java installs.
COPY docker/ca-certificates/ /usr/local/share/ca-certificates/
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends maven unzip ca-certificates; \
    rm -rf /var/lib/apt/lists/*
COPY jvm/settings.xml /build/jvm/settings.xml
COPY jvm/kafka-broker/pom.xml /build/jvm/kafka-broker/pom.xml
# As scripts/fetch-jars.sh does: Central's address as Maven itself knows it (its super POM).
RUN set -eux; \
    mvn_home="$(mvn -v | sed -n 's/^Maven home: //p')"; \
    EOS_MAVEN_CENTRAL_URL="$(unzip -p "$mvn_home"/lib/maven-model-builder-*.jar \
      org/apache/maven/model/pom-4.0.0.xml | grep -o '<url>[^<]*' | head -1 | cut -c6-)"; \
    export EOS_MAVEN_CENTRAL_URL; \
    mvn -B -q -s /build/jvm/settings.xml -Dmaven.repo.local=/build/m2 -f /build/jvm/kafka-broker/pom.xml \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/opt/kafka/libs; \
    ls /opt/kafka/libs/kafka_2.13-*.jar


# ---- the broker ----
FROM debian:bookworm-slim
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 1000 kafka; \
    useradd --system --uid 1000 --gid kafka --home-dir /opt/kafka kafka; \
    mkdir -p /var/lib/kafka/data /opt/kafka/config /opt/kafka/logs; \
    chown -R kafka:kafka /var/lib/kafka /opt/kafka/config /opt/kafka/logs
COPY --from=jars /opt/kafka/libs /opt/kafka/libs
COPY stack/log4j2.yaml /opt/kafka/config/log4j2.yaml
COPY docker/kafka-start.sh /opt/kafka/bin/kafka-start.sh
USER kafka
# A new named volume mounted at the data folder starts with the kafka user as its owner.
VOLUME /var/lib/kafka/data
ENTRYPOINT ["/opt/kafka/bin/kafka-start.sh"]
