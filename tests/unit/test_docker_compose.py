"""docker-compose.yaml describes the same stack as the Makefile's local one.

No Docker here: the compose file, docker/*.Dockerfile and docker/postgres-init/ are parsed and
compared with the files the local stack is made from (jvm/kafka-broker/pom.xml, stack/stack.sh,
stack/server.properties.in, requirements.in, requirements.lock, pyproject.toml). Values of the form
``${VAR:-default}`` are read as their default, i.e. as `docker compose up` sees them with no .env file.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[2]
COMPOSE = "docker-compose.yaml"
DOCKERFILE = "docker/airflow.Dockerfile"
# Every image of the compose file is built from a Dockerfile of ours on this one base image, so it
# builds where no image registry is reachable (scripts/docker.sh base-image makes it there).
DOCKERFILES = ("docker/airflow.Dockerfile", "docker/kafka.Dockerfile", "docker/postgres.Dockerfile")
BASE_IMAGE = "debian:bookworm-slim"
POSTGRES_INIT = "docker/postgres-init"
AIRFLOW_HOME = "/opt/airflow"
STATE_DIR = "/opt/eos/state"
# Repository folders every Airflow container needs, mounted at /opt/airflow/<name>.
# spark/ and expectations/ are found beside the mounted eos_ingest (eos_ingest.paths), plugins/ is
# Airflow's plugins folder; the image's wheel ships all three too (its build copies them).
PROJECT_FOLDERS = ("dags", "pipelines", "spark", "plugins", "expectations")
# Plain (not templated) settings of stack/server.properties.in that legitimately differ in Docker.
KAFKA_SETTINGS_NOT_COPIED = {
    "listener.security.protocol.map": "compose adds PLAINTEXT_HOST, the listener published to the host",
}
KAFKA_SETTINGS_THAT_MUST_MATCH = (
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
)


def read(rel: str) -> str:
    path = REPO / rel
    assert path.is_file(), f"{rel} is missing"
    return path.read_text()


def interpolate(value: Any) -> str:
    """A compose value as a string: ${VAR:-d}, ${VAR-d} -> d; ${VAR} -> ''; $$ -> $."""
    text = str(value)
    text = re.sub(r"(?<!\$)\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}", lambda m: m.group(1) or "", text)
    return text.replace("$$", "$")


@cache
def compose() -> dict[str, Any]:
    data = yaml.safe_load(read(COMPOSE))
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), f"{COMPOSE} has no services"
    return data


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def service(name: str) -> dict[str, Any]:
    assert name in services(), f"{COMPOSE} has no service {name!r}; services: {sorted(services())}"
    return services()[name]


def airflow_services() -> dict[str, dict[str, Any]]:
    """The services built from docker/airflow.Dockerfile."""
    found = {
        name: svc
        for name, svc in services().items()
        if isinstance(svc.get("build"), dict) and svc["build"].get("dockerfile") == DOCKERFILE
    }
    assert found, f"no service of {COMPOSE} is built from {DOCKERFILE} (build.dockerfile)"
    return found


def env(svc: dict[str, Any]) -> dict[str, str]:
    raw = svc.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    return {str(k): interpolate(v) for k, v in raw.items()}


def published_ports(svc: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host_ip, published, target) of every published port; host_ip '' means all interfaces."""
    result = []
    for port in svc.get("ports") or []:
        if isinstance(port, dict):
            result.append((port.get("host_ip", ""), int(port["published"]), int(port["target"])))
            continue
        parts = interpolate(port).split("/")[0].rsplit(":", 2)
        if len(parts) == 3:
            result.append((parts[0].strip("[]"), int(parts[1]), int(parts[2])))
        elif len(parts) == 2:
            result.append(("", int(parts[0]), int(parts[1])))
        else:
            result.append(("", int(parts[0]), int(parts[0])))  # random host port, really; flagged below
    return result


def volumes(svc: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(source, target, read_only) of every mount."""
    result = []
    for vol in svc.get("volumes") or []:
        if isinstance(vol, dict):
            result.append((vol.get("source", ""), vol["target"], bool(vol.get("read_only"))))
            continue
        parts = interpolate(vol).split(":")
        mode = parts[2] if len(parts) > 2 else ""
        result.append((parts[0], parts[1] if len(parts) > 1 else parts[0], "ro" in mode.split(",")))
    return result


def stack_default(var: str) -> int:
    """The default of ${VAR:-N} in stack/stack.sh."""
    match = re.search(rf"\$\{{{var}:-(\d+)\}}", read("stack/stack.sh"))
    assert match, f"stack/stack.sh has no ${{{var}:-<port>}} default any more; update this test"
    return int(match.group(1))


def server_properties() -> dict[str, str]:
    props = {}
    for line in read("stack/server.properties.in").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


def kafka_env_name(prop: str) -> str:
    """The apache/kafka image's variable for a server property: . -> _, _ -> __, - -> ___."""
    return "KAFKA_" + prop.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """'NAME://host:port,...' -> {NAME: (host, port)}."""
    result = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, address = item.split("://", 1)
        host, port = address.rsplit(":", 1)
        result[name] = (host, int(port))
    return result


def kafka_env() -> dict[str, str]:
    return env(service("kafka"))


def internal_bootstrap() -> str:
    """host:port the other containers reach the broker on: the advertised inter-broker listener."""
    kenv = kafka_env()
    name = kenv.get("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT")
    advertised = listeners(kenv.get("KAFKA_ADVERTISED_LISTENERS", ""))
    assert name in advertised, (
        f"{COMPOSE}: kafka's KAFKA_ADVERTISED_LISTENERS has no {name} listener (the inter-broker one, "
        f"which the Airflow containers use)"
    )
    host, port = advertised[name]
    return f"{host}:{port}"


def dockerfile_instructions(dockerfile: str = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile (docker/airflow.Dockerfile), continuation lines joined."""
    text = re.sub(r"\\\n", " ", read(dockerfile))
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def airflow_image_python() -> str:
    """The Python of the Airflow image: its ENV PYTHON_VERSION (the python<X.Y> it installs)."""
    values = [
        m.group(1)
        for word, args in dockerfile_instructions()
        if word == "ENV" and (m := re.match(r"PYTHON_VERSION=(\d+\.\d+)$", args))
    ]
    assert len(values) == 1, f"{DOCKERFILE} should set ENV PYTHON_VERSION=<X.Y> once, found {values}"
    return values[0]


# ---- Kafka ----------------------------------------------------------------------------------------


def test_kafka_image_is_the_broker_version_of_the_local_stack() -> None:
    match = re.search(r"<kafka.version>([^<]+)</kafka.version>", read("jvm/kafka-broker/pom.xml"))
    assert match, "jvm/kafka-broker/pom.xml has no <kafka.version>"
    kafka = service("kafka")
    image = kafka.get("image", "")
    assert image == f"eos-ingest-kafka:{match.group(1)}", (
        f"{COMPOSE}: kafka's image is {image!r} but the local broker is Kafka {match.group(1)} "
        f"(jvm/kafka-broker/pom.xml); tag it eos-ingest-kafka:{match.group(1)} in {COMPOSE}"
    )
    assert kafka.get("build", {}).get("dockerfile") == "docker/kafka.Dockerfile", (
        f"{COMPOSE}: kafka should be built from docker/kafka.Dockerfile (the jars of jvm/kafka-broker)"
    )
    copies = " ".join(
        args for word, args in dockerfile_instructions("docker/kafka.Dockerfile") if word == "COPY"
    )
    assert "jvm/kafka-broker/pom.xml" in copies, (
        "docker/kafka.Dockerfile should fetch the jars of jvm/kafka-broker/pom.xml"
    )


def test_kafka_is_published_on_the_port_of_the_local_stack() -> None:
    port = stack_default("KAFKA_PORT")
    kenv = kafka_env()
    advertised = listeners(kenv.get("KAFKA_ADVERTISED_LISTENERS", ""))
    host_listeners = [name for name, (_, p) in advertised.items() if p == port]
    assert host_listeners, (
        f"{COMPOSE}: no advertised Kafka listener on port {port}, the KAFKA_PORT default of stack/stack.sh; "
        f"advertise the host listener on {port} in KAFKA_ADVERTISED_LISTENERS (and bind and publish it) in {COMPOSE}"
    )
    host, _ = advertised[host_listeners[0]]
    assert host in ("127.0.0.1", "localhost"), (
        f"{COMPOSE}: the listener on port {port} advertises {host!r}; the host reaches the container "
        f"through the published port, so advertise 127.0.0.1 (as stack/server.properties.in does)"
    )
    bound = listeners(kenv.get("KAFKA_LISTENERS", ""))
    assert bound.get(host_listeners[0], ("", -1))[1] == port, (
        f"{COMPOSE}: KAFKA_LISTENERS should bind {host_listeners[0]} on port {port}, as it is advertised"
    )
    published = [(ip, pub) for ip, pub, target in published_ports(service("kafka")) if target == port]
    assert published and all(pub == port for _, pub in published), (
        f"{COMPOSE}: kafka should publish container port {port} on host port {port} (KAFKA_PORT default "
        f"in stack/stack.sh); it publishes {published_ports(service('kafka'))}"
    )


def test_kafka_controller_port_is_the_one_of_the_local_stack() -> None:
    port = stack_default("KAFKA_CONTROLLER_PORT")
    kenv = kafka_env()
    controller = kenv.get("KAFKA_CONTROLLER_LISTENER_NAMES", "")
    bound = listeners(kenv.get("KAFKA_LISTENERS", ""))
    assert bound.get(controller, ("", -1))[1] == port, (
        f"{COMPOSE}: the {controller or 'controller'} listener in KAFKA_LISTENERS should be on port {port}, "
        f"the KAFKA_CONTROLLER_PORT default of stack/stack.sh"
    )
    voters = kenv.get("KAFKA_CONTROLLER_QUORUM_VOTERS", "")
    assert voters.endswith(f":{port}"), (
        f"{COMPOSE}: KAFKA_CONTROLLER_QUORUM_VOTERS={voters!r} should name the controller port {port}"
    )


def test_kafka_settings_are_those_of_server_properties() -> None:
    props = server_properties()
    kenv = kafka_env()
    plain = {k: v for k, v in props.items() if "@" not in v and k not in KAFKA_SETTINGS_NOT_COPIED}
    missing = [k for k in KAFKA_SETTINGS_THAT_MUST_MATCH if k not in plain]
    assert not missing, (
        f"stack/server.properties.in no longer sets {missing} as plain values; update this test"
    )
    wrong = {
        kafka_env_name(k): (kenv.get(kafka_env_name(k)), v)
        for k, v in plain.items()
        if kenv.get(kafka_env_name(k)) != v
    }
    assert not wrong, (
        f"{COMPOSE}: kafka's environment disagrees with stack/server.properties.in "
        f"(variable: (compose value, server.properties.in value)): {wrong}; set them in {COMPOSE}"
    )
    local_map = dict(item.split(":") for item in props["listener.security.protocol.map"].split(","))
    docker_map = dict(
        item.split(":") for item in kenv.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "").split(",")
    )
    assert local_map.items() <= docker_map.items(), (
        f"{COMPOSE}: KAFKA_LISTENER_SECURITY_PROTOCOL_MAP {docker_map} should contain the listeners of "
        f"stack/server.properties.in {local_map}"
    )


def test_kafka_healthcheck_asks_the_broker() -> None:
    test = service("kafka").get("healthcheck", {}).get("test", [])
    command = test if isinstance(test, str) else " ".join(map(str, test))
    _, port = internal_bootstrap().rsplit(":", 1)
    assert "Kafka Server started" in command and f"/dev/tcp/127.0.0.1/{port}" in command, (
        f"{COMPOSE}: kafka's healthcheck should wait for the broker's 'Kafka Server started' line and "
        f"its listener on port {port}, so 'healthy' means the broker is up; it is {test!r}"
    )


def test_airflow_containers_use_the_internal_kafka_listener() -> None:
    bootstrap = internal_bootstrap()
    for name, svc in airflow_services().items():
        aenv = env(svc)
        assert aenv.get("EOS_KAFKA_BOOTSTRAP") == bootstrap, (
            f"{COMPOSE}: {name} has EOS_KAFKA_BOOTSTRAP={aenv.get('EOS_KAFKA_BOOTSTRAP')!r}, but kafka "
            f"advertises {bootstrap} to the other containers"
        )
        conn = json.loads(aenv.get("AIRFLOW_CONN_KAFKA_DEFAULT") or "{}")
        assert (
            conn.get("conn_type") == "kafka" and conn.get("extra", {}).get("bootstrap.servers") == bootstrap
        ), (
            f"{COMPOSE}: {name}'s AIRFLOW_CONN_KAFKA_DEFAULT should be JSON with conn_type 'kafka' and "
            f"extra bootstrap.servers {bootstrap!r}; it is {conn}"
        )
        spark = json.loads(aenv.get("AIRFLOW_CONN_SPARK_DEFAULT") or "{}")
        assert spark.get("conn_type") == "spark" and spark.get("host") == "local[*]", (
            f"{COMPOSE}: {name}'s AIRFLOW_CONN_SPARK_DEFAULT should be JSON with conn_type 'spark' and "
            f"host 'local[*]' (Spark runs inside the task, as locally); it is {spark}"
        )


# ---- the Airflow image ----------------------------------------------------------------------------


def test_airflow_image_is_the_pinned_airflow() -> None:
    match = re.search(r"^apache-airflow==(\S+)", read("requirements.in"), re.MULTILINE)
    assert match, "requirements.in has no apache-airflow==<version> pin"
    locked = re.search(r"^apache-airflow==(\S+)", read("requirements.lock"), re.MULTILINE)
    assert locked and locked.group(1) == match.group(1), (
        f"requirements.lock (what {DOCKERFILE} installs) pins apache-airflow {locked and locked.group(1)}, "
        f"requirements.in {match.group(1)}; recompile the lock (make lock)"
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_images_build_from_the_one_base_image(dockerfile: str) -> None:
    stages: set[str] = set()
    for word, args in dockerfile_instructions(dockerfile):
        if word != "FROM":
            continue
        tokens = [t for t in args.split() if not t.startswith("--")]
        assert tokens[0] in stages or tokens[0] == BASE_IMAGE, (
            f"{dockerfile}: FROM {tokens[0]}: every stage should start from {BASE_IMAGE} or an earlier "
            f"stage, the one image scripts/docker.sh base-image makes where no registry is reachable"
        )
        if len(tokens) == 3 and tokens[1].upper() == "AS":
            stages.add(tokens[2])
    assert not read(dockerfile).startswith("# syntax="), (
        f"{dockerfile}: a syntax line makes BuildKit pull its frontend image; the built-in one is used"
    )


def test_airflow_image_python_is_the_project_python() -> None:
    python = airflow_image_python()
    requires = tomllib.loads(read("pyproject.toml"))["project"]["requires-python"]
    assert SpecifierSet(requires).contains(python), (
        f"{DOCKERFILE} uses Python {python} but pyproject.toml requires-python is {requires!r}; "
        f"change PYTHON_VERSION in {DOCKERFILE} (the Python of its Debian release)"
    )
    lock = re.search(r"--python-version[ =](\d+\.\d+)", read("requirements.lock"))
    assert lock and lock.group(1) == python, (
        f"requirements.lock was compiled for Python {lock and lock.group(1)} but {DOCKERFILE} runs "
        f"Python {python}; recompile the lock (make lock) or change {DOCKERFILE}"
    )


def test_airflow_image_installs_the_lock_and_the_jars() -> None:
    runs = " ".join(args for word, args in dockerfile_instructions() if word == "RUN")
    copies = [args.split() for word, args in dockerfile_instructions() if word == "COPY"]
    installer = next((c[-1] for c in copies if "docker/install-lock.sh" in c), None)
    name = installer and installer.rsplit("/", 1)[-1]  # on PATH in the image
    assert name and re.search(rf"(^|[\s;]){re.escape(name)} \S*requirements\.lock", runs), (
        f"{DOCKERFILE} should install requirements.lock (the exact pins `make setup` installs) with "
        "docker/install-lock.sh, the command tests/integration/test_image_lock.py checks the lock with"
    )
    assert "scripts/fetch-jars.sh" in runs, (
        f"{DOCKERFILE} should run scripts/fetch-jars.sh, which fetches the Spark connector jars"
    )
    assert "openjdk-17" in runs, (
        f"{DOCKERFILE} should install Java 17 (openjdk-17-jre-headless) for spark-submit"
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_images_copy_only_files_in_their_build_context(dockerfile: str) -> None:
    ignore = dockerfile + ".dockerignore"
    patterns = [
        line.strip() for line in read(ignore).splitlines() if line.strip() and not line.startswith("#")
    ]
    assert patterns[:1] == ["*"], f"{ignore} should start with '*' and list what the build may see with '!'"
    allowed = [p[1:].rstrip("/") for p in patterns if p.startswith("!")]
    for word, args in dockerfile_instructions(dockerfile):
        if word not in ("COPY", "ADD"):
            continue
        tokens = shlex.split(args)
        if any(t.startswith("--from") for t in tokens):
            continue
        sources = [t for t in tokens if not t.startswith("--")][:-1]
        for src in sources:
            src = src.rstrip("/")
            assert (REPO / src).exists(), f"{dockerfile} copies {src}, which is not in the repository"
            assert any(src == a or src.startswith(a + "/") for a in allowed), (
                f"{dockerfile} copies {src} but {ignore} keeps it out of the build context; add !{src} there"
            )


def test_eos_ingest_command_runs_the_declared_entry_point() -> None:
    target = tomllib.loads(read("pyproject.toml"))["project"]["scripts"]["eos-ingest"]
    module, func = target.split(":")
    assert f"from {module} import {func}" in read("docker/eos-ingest"), (
        f"docker/eos-ingest should call {target}, the eos-ingest entry point of pyproject.toml"
    )


# ---- the Airflow services -------------------------------------------------------------------------


def test_airflow_runs_the_airflow_3_components() -> None:
    commands = {}
    for name, svc in airflow_services().items():
        command = svc.get("command", "")
        commands[name] = command if isinstance(command, str) else " ".join(map(str, command))
    for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
        assert any(re.fullmatch(rf"(airflow )?{component}", c.strip()) for c in commands.values()), (
            f"{COMPOSE}: no Airflow service runs `airflow {component}`; commands: {commands}"
        )
    assert any("airflow db migrate" in c for c in commands.values()), (
        f"{COMPOSE}: an init service should run `airflow db migrate` before the others start"
    )


def test_project_folders_are_mounted() -> None:
    for folder in PROJECT_FOLDERS:
        assert (REPO / folder).is_dir(), f"{folder}/ is mounted by {COMPOSE} but missing from the repository"
    for name, svc in airflow_services().items():
        mounts = {target: (source, ro) for source, target, ro in volumes(svc)}
        for folder in (*PROJECT_FOLDERS, "eos_ingest"):
            target = f"{AIRFLOW_HOME}/{folder}"
            assert mounts.get(target, ("",))[0].rstrip("/") in (f"./{folder}", folder), (
                f"{COMPOSE}: {name} should mount ./{folder} at {target}; its volumes: {svc.get('volumes')}"
            )
        assert mounts[f"{AIRFLOW_HOME}/eos_ingest"][1], (
            f"{COMPOSE}: {name} should mount ./eos_ingest read-only (:ro)"
        )
        pythonpath = env(svc).get("PYTHONPATH", "").split(":")
        assert AIRFLOW_HOME in pythonpath, (
            f"{COMPOSE}: {name} should have {AIRFLOW_HOME} on PYTHONPATH, so the mounted eos_ingest imports"
        )


def test_airflow_reads_the_mounted_plugins_and_expectations_folders() -> None:
    for name, svc in airflow_services().items():
        settings = env(svc)
        assert settings.get("AIRFLOW__CORE__PLUGINS_FOLDER") == f"{AIRFLOW_HOME}/plugins", name
        assert settings.get("EOS_EXPECTATIONS_DIR") == f"{AIRFLOW_HOME}/expectations", name


def test_the_image_builds_the_package_from_every_folder_the_wheel_maps_in() -> None:
    """pyproject.toml's package-dir maps spark/, expectations/ and plugins/ into the wheel: a build
    without them would lack the job, the default suite and the plugin."""
    mapped = set(tomllib.loads(read("pyproject.toml"))["tool"]["setuptools"]["package-dir"].values())
    copied = {
        shlex.split(args)[-2].rstrip("/")
        for word, args in dockerfile_instructions(DOCKERFILE)
        if word == "COPY" and shlex.split(args)[-1].startswith("/tmp/eos/package/")
    }
    assert mapped <= copied, f"{DOCKERFILE} should copy {sorted(mapped - copied)} into /tmp/eos/package/"


def test_state_lives_in_a_named_volume() -> None:
    declared = compose().get("volumes") or {}
    image_env = {}
    for word, args in dockerfile_instructions():
        if word == "ENV":
            key, _, value = args.replace("=", " ", 1).partition(" ")
            image_env[key] = value.strip()
    assert image_env.get("EOS_STATE_DIR") == STATE_DIR, (
        f"{DOCKERFILE} should set ENV EOS_STATE_DIR={STATE_DIR}"
    )
    for name, svc in airflow_services().items():
        aenv = env(svc)
        assert aenv.get("EOS_STATE_DIR") == STATE_DIR, (
            f"{COMPOSE}: {name} should set EOS_STATE_DIR={STATE_DIR}"
        )
        sources = [source for source, target, _ in volumes(svc) if target == STATE_DIR]
        assert sources and sources[0] in declared, (
            f"{COMPOSE}: {name} should mount a named volume (declared under top-level volumes:) at {STATE_DIR}"
        )
        for key in ("AIRFLOW__LOGGING__BASE_LOG_FOLDER", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"):
            assert aenv.get(key, "").startswith(STATE_DIR + "/"), (
                f"{COMPOSE}: {name}'s {key} should be under {STATE_DIR}, the state volume all containers share"
            )


def test_published_ports_are_bound_to_localhost() -> None:
    for name, svc in services().items():
        for host_ip, published, target in published_ports(svc):
            assert host_ip == "127.0.0.1", (
                f"{COMPOSE}: {name} publishes port {target} on {host_ip or 'every interface'}; bind it to "
                f'127.0.0.1 ("127.0.0.1:{published}:{target}")'
            )
    api = [svc for svc in airflow_services().values() if published_ports(svc)]
    assert len(api) == 1, f"{COMPOSE}: exactly one Airflow service (the api-server) should publish a port"
    port = int(env(api[0]).get("AIRFLOW__API__PORT", "8080"))
    assert ("127.0.0.1", 8080, port) in published_ports(api[0]), (
        f"{COMPOSE}: the Airflow UI should be published as 127.0.0.1:8080:{port}"
    )


def test_dependencies_wait_for_ready_services() -> None:
    for name, svc in services().items():
        depends = svc.get("depends_on") or {}
        assert isinstance(depends, dict), (
            f"{COMPOSE}: {name} lists depends_on without conditions, which waits for nothing; "
            f"give each a condition (service_healthy or service_completed_successfully)"
        )
        for target, spec in depends.items():
            assert target in services(), f"{COMPOSE}: {name} depends on {target!r}, which is not a service"
            condition = (spec or {}).get("condition")
            other = services()[target]
            if condition == "service_healthy":
                check = other.get("healthcheck") or {}
                assert check.get("test") and not check.get("disable"), (
                    f"{COMPOSE}: {name} waits for {target} to be healthy, but {target} has no healthcheck"
                )
            elif condition == "service_completed_successfully":
                assert other.get("restart") in (None, "no", "on-failure"), (
                    f"{COMPOSE}: {name} waits for {target} to complete, but {target} restarts "
                    f"({other.get('restart')}); a one-shot service must not"
                )
            else:
                pytest.fail(
                    f"{COMPOSE}: {name} depends on {target} with condition {condition!r}: it does not wait"
                )
    for name, svc in airflow_services().items():
        depends = svc.get("depends_on") or {}
        wanted = ("postgres",) if "db migrate" in str(svc.get("command")) else ("postgres", "kafka")
        for target in wanted:
            assert (depends.get(target) or {}).get("condition") == "service_healthy", (
                f"{COMPOSE}: {name} should wait for {target} (depends_on condition: service_healthy)"
            )


def test_postgres_init_creates_both_databases() -> None:
    postgres = service("postgres")
    assert (f"./{POSTGRES_INIT}", "/docker-entrypoint-initdb.d", True) in volumes(postgres), (
        f"{COMPOSE}: postgres should mount ./{POSTGRES_INIT} at /docker-entrypoint-initdb.d read-only"
    )
    sql = init_sql()
    databases = set(re.findall(r"CREATE\s+DATABASE\s+(\w+)", sql, re.IGNORECASE))
    assert len(databases) >= 2, f"{POSTGRES_INIT}/*.sql should create the airflow and control databases"
    roles = role_password_files()
    urls = database_urls()
    for key, raw in urls.items():
        url = make_url(raw)
        assert url.get_backend_name() == "postgresql" and url.host == "postgres", (
            f"{COMPOSE}: {key}={raw!r} should point at the postgres service"
        )
        assert url.database in databases, (
            f"{COMPOSE}: {key} uses database {url.database!r}, which {POSTGRES_INIT}/*.sql does not create "
            f"(it creates {sorted(databases)})"
        )
        assert url.username in roles, (
            f"{COMPOSE}: {key} logs in as {url.username!r}; {POSTGRES_INIT}/*.sql should create that role "
            f"with a password read from a file of db-secrets (it creates {sorted(roles)})"
        )
    assert (
        make_url(urls["EOS_CONTROL_DB_URL"]).database
        != make_url(urls["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).database
    ), f"{COMPOSE}: the control tables and Airflow's metadata should be two databases"


def init_sql() -> str:
    return "\n".join(p.read_text() for p in sorted((REPO / POSTGRES_INIT).glob("*.sql")))


def database_urls() -> dict[str, str]:
    """The two PostgreSQL URLs every Airflow service has: Airflow's metadata and the control DB."""
    urls = {}
    for svc in airflow_services().values():
        aenv = env(svc)
        urls["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = aenv.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
        urls["EOS_CONTROL_DB_URL"] = aenv.get("EOS_CONTROL_DB_URL", "")
    return urls


DB_SECRETS = "/run/eos-db-secrets"  # where the volume db-secrets is mounted (docker/db-secrets.sh)
DB_SECRETS_SCRIPT = "docker/db-secrets.sh"


def role_password_files() -> dict[str, str]:
    """role -> the file its password is read from in the init SQL (psql: \\set v `cat file`, then :'v')."""
    sql = init_sql()
    files = dict(re.findall(r"^\\set\s+(\w+)\s+`cat\s+(\S+)`\s*$", sql, re.MULTILINE))
    roles = re.findall(r"CREATE\s+(?:ROLE|USER)\s+(\w+)\b[^;]*?PASSWORD\s+:'(\w+)'", sql, re.IGNORECASE)
    return {role: files[var] for role, var in roles if var in files}


def test_no_fixed_database_password() -> None:
    """No database password that anyone reading this repository knows: not in a service's
    environment, not in a URL, not in the init SQL. They are generated at the first start."""
    for name, svc in services().items():
        for key, value in env(svc).items():
            assert key != "POSTGRES_PASSWORD", f"{COMPOSE}: {name} sets a fixed POSTGRES_PASSWORD"
            assert not re.search(r"://[^/@:\s]+:[^/@\s]*@", value), (
                f"{COMPOSE}: {name}'s {key} holds a password"
            )
    assert env(service("postgres")).get("POSTGRES_PASSWORD_FILE", "").startswith(f"{DB_SECRETS}/postgres/"), (
        f"{COMPOSE}: postgres should read its superuser's password from the generated {DB_SECRETS}"
    )
    sql = init_sql()
    assert not re.search(r"PASSWORD\s+'", sql, re.IGNORECASE), f"{POSTGRES_INIT}: a literal password"
    assert set(role_password_files()) >= {"airflow", "eos"}, (
        f"{POSTGRES_INIT}: roles without a generated password"
    )


def test_every_database_client_mounts_the_generated_passwords_after_db_secrets_ran() -> None:
    generator = service("db-secrets")
    assert generator.get("restart") in (None, "no"), "db-secrets is one-shot"
    assert (f"./{DB_SECRETS_SCRIPT}", "/opt/eos/db-secrets.sh", True) in volumes(generator)
    assert ("db-secrets", DB_SECRETS, False) in volumes(generator)
    assert generator["entrypoint"] == ["sh", "/opt/eos/db-secrets.sh", DB_SECRETS]
    postgres = service("postgres")
    assert ("db-secrets", DB_SECRETS, True) in volumes(postgres)
    assert postgres["depends_on"]["db-secrets"]["condition"] == "service_completed_successfully"
    for name, svc in airflow_services().items():
        assert ("db-secrets", DB_SECRETS, True) in volumes(svc), f"{COMPOSE}: {name} lacks {DB_SECRETS}"
        assert env(svc).get("PGPASSFILE") == f"{DB_SECRETS}/airflow/pgpass", name


def run_db_secrets_script(folder: Path) -> str:
    import os
    import subprocess

    mine = str(os.getuid())  # as root, the script hands the files to these owners
    done = subprocess.run(
        ["sh", str(REPO / DB_SECRETS_SCRIPT), str(folder)],
        env={**os.environ, "POSTGRES_UID": mine, "AIRFLOW_UID": mine},
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout + done.stderr


def test_the_db_secrets_script_generates_once_and_its_pgpass_logs_in_every_url(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    said = run_db_secrets_script(first)
    files = {role: first / Path(path).relative_to(DB_SECRETS) for role, path in role_password_files().items()}
    files["postgres"] = first / Path(env(service("postgres"))["POSTGRES_PASSWORD_FILE"]).relative_to(
        DB_SECRETS
    )
    passwords = {role: file.read_text() for role, file in files.items()}
    assert len(set(passwords.values())) == len(passwords) and all(len(p) >= 24 for p in passwords.values())
    pgpass = first / Path(env(next(iter(airflow_services().values())))["PGPASSFILE"]).relative_to(DB_SECRETS)
    for file in [*files.values(), pgpass]:
        assert file.stat().st_mode & 0o777 == 0o600 and file.parent.stat().st_mode & 0o777 == 0o700, file
    assert not any(p in said for p in passwords.values()) and "eos_password" in said  # where, not what

    # libpq's rule: host:port:database:user:password; each URL of the compose file finds its role's.
    lines = {tuple(line.split(":", 4)[:4]): line.split(":", 4)[4] for line in pgpass.read_text().splitlines()}
    for key, raw in database_urls().items():
        url = make_url(raw)
        found = lines.get((url.host, str(url.port or 5432), url.database, url.username))
        assert found == passwords[url.username], f"{key}: no pgpass line with role {url.username}'s password"
    assert "postgres" not in {user for _, _, _, user in lines}  # the superuser's stays with PostgreSQL

    run_db_secrets_script(first)  # a restart keeps them: the database was initialised with these
    assert {role: file.read_text() for role, file in files.items()} == passwords
    run_db_secrets_script(second)  # another installation: other passwords
    assert (second / "postgres" / "eos_password").read_text() != passwords["eos"]


SECRETS_SCRIPT = "docker/airflow-secrets.sh"
FIXED_SECRETS = (
    "AIRFLOW__API_AUTH__JWT_SECRET",
    "AIRFLOW__WEBSERVER__SECRET_KEY",
    "AIRFLOW__API__SECRET_KEY",
)


def test_no_fixed_admin_password_or_jwt_secret() -> None:
    """With no .env file, `docker compose up` must not start with a password or signing key that
    anyone reading this repository knows: they are generated at the first start or given."""
    raw = read(COMPOSE)
    for name, svc in airflow_services().items():
        aenv = env(svc)
        for key in FIXED_SECRETS:
            assert not aenv.get(key), f"{COMPOSE}: {name} sets {key} to a fixed value"
        assert (
            aenv.get("AIRFLOW__API_AUTH__JWT_SECRET_CMD", "") == f"cat {STATE_DIR}/airflow/secrets/jwt_secret"
        ), f"{COMPOSE}: {name} should read the JWT key generated into the state volume"
        assert not aenv.get("EOS_AIRFLOW_ADMIN_PASSWORD"), f"{COMPOSE}: {name} has a default admin password"
    assert "admin:admin" not in raw.replace("SIMPLE_AUTH_MANAGER_USERS: admin:admin", "")  # user:role only
    assert not re.search(r"password\s+admin\b", raw, re.IGNORECASE), (
        f"{COMPOSE} still documents password admin"
    )


def test_airflow_init_generates_the_secrets_with_the_mounted_script() -> None:
    init = service("airflow-init")
    mounts = {target: (source, ro) for source, target, ro in volumes(init)}
    target = "/opt/eos/airflow-secrets.sh"
    assert mounts.get(target) == (f"./{SECRETS_SCRIPT}", True), (
        f"{COMPOSE}: airflow-init should mount {SECRETS_SCRIPT}"
    )
    command = "\n".join(init["command"]) if isinstance(init["command"], list) else init["command"]
    script_at = command.index(f"sh {target}")
    assert script_at < command.index("airflow db migrate")
    passwords = env(init)["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    assert passwords == f"{STATE_DIR}/airflow/secrets/simple_auth_manager_passwords.json"


def run_secrets_script(folder: Path, **environ: str) -> str:
    import os
    import subprocess

    base = {
        k: v for k, v in os.environ.items() if k not in ("AIRFLOW_JWT_SECRET", "EOS_AIRFLOW_ADMIN_PASSWORD")
    }
    done = subprocess.run(
        ["sh", str(REPO / SECRETS_SCRIPT), str(folder / "secrets"), str(folder / "secrets" / "passwords.json")],
        env={**base, **environ}, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout + done.stderr


def test_the_secrets_script_generates_once_keeps_them_and_takes_given_ones(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    said = run_secrets_script(first)
    jwt, passwords = first / "secrets" / "jwt_secret", first / "secrets" / "passwords.json"
    key, admin = jwt.read_text(), json.loads(passwords.read_text())["admin"]
    assert len(key) >= 48 and len(admin) >= 16 and "\n" not in key
    assert jwt.stat().st_mode & 0o777 == 0o600 and passwords.stat().st_mode & 0o777 == 0o600
    assert key not in said and admin not in said and "passwords.json" in said  # says where, not what

    run_secrets_script(first)  # a restart keeps them: running sessions and the password stay valid
    assert jwt.read_text() == key and json.loads(passwords.read_text())["admin"] == admin

    run_secrets_script(second)  # another installation: other secrets
    assert (second / "secrets" / "jwt_secret").read_text() != key

    given = 'pa"ss\\word'
    run_secrets_script(first, AIRFLOW_JWT_SECRET="given-jwt-key", EOS_AIRFLOW_ADMIN_PASSWORD=given)
    assert jwt.read_text() == "given-jwt-key"
    assert json.loads(passwords.read_text()) == {"admin": given}


def test_the_image_builds_the_package_with_the_setuptools_the_wheel_tests_build_with() -> None:
    """The image builds eos-ingest without isolation, with requirements.lock's setuptools; every
    `uv build` of the wheel takes requirements-bootstrap.lock's as its constraint."""
    pins = {
        lock: re.search(r"^setuptools==(\S+)", read(lock), re.MULTILINE)
        for lock in ("requirements.lock", "requirements-bootstrap.lock")
    }
    versions = {lock: found and found.group(1) for lock, found in pins.items()}
    assert None not in versions.values() and len(set(versions.values())) == 1, (
        f"setuptools is pinned differently (or not at all): {versions}; pin one version in "
        "requirements.in and requirements-bootstrap.in, then make lock"
    )
    runs = " ".join(args for word, args in dockerfile_instructions() if word == "RUN")
    assert "--no-build-isolation" in runs, f"{DOCKERFILE} should build eos-ingest with the lock's setuptools"
