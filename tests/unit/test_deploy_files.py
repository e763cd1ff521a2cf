"""The deploy files stay true to the application: every ``NAKADI_*`` variable they
set is one the broker reads and parses, ports and health paths are the ones gunicorn
and the app serve, shutdown grace covers ``graceful_timeout``; and the real tools
accept them (hadolint, the Kubernetes schemas, the Compose specification, yamllint).
"""

from __future__ import annotations

import ast
import configparser
import importlib.metadata
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from app import create_app
from app.config import Settings
from app.streaming.limits import MAX_STREAM_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
BIN = Path(sys.executable).parent
YAMLLINT_CONFIG = "{extends: default, rules: {line-length: {max: 100}, document-start: disable}}"
GUNICORN_COMMAND = ["gunicorn", "-c", "gunicorn.conf.py", "app.wsgi:app"]


def gunicorn_variables() -> dict[str, str]:
    """The variables gunicorn.conf.py reads, with their defaults."""
    source = (ROOT / "gunicorn.conf.py").read_text()
    return dict(re.findall(r'os\.environ\.get\("(NAKADI_\w+)", "([^"]*)"\)', source))


def settings_variables() -> set[str]:
    """The variables of the broker's settings (``Settings.from_env`` parses them)."""
    return {f"NAKADI_{field.name.upper()}" for field in fields(Settings)}


def read_variables() -> set[str]:
    """Every variable the broker reads: its settings and gunicorn's."""
    return settings_variables() | set(gunicorn_variables())


def assert_true_variables(env: dict[str, object], where: str) -> None:
    """Each NAKADI_* variable is read by the broker and its value parses."""
    nakadi = {name: str(value) for name, value in env.items() if name.startswith("NAKADI_")}
    unknown = set(nakadi) - read_variables()
    assert not unknown, f"{where} sets variables the broker does not read: {sorted(unknown)}"
    Settings.from_env(nakadi)  # raises naming the variable whose value does not parse
    # gunicorn's own numbers; those it shares with the settings (the log level) were
    # parsed just above.
    for name in set(nakadi) & set(gunicorn_variables()) - {"NAKADI_BIND"} - settings_variables():
        assert nakadi[name].isdigit(), f"{where}: {name}={nakadi[name]!r} is not a number"


def graceful_timeout(env: dict[str, object]) -> int:
    return int(str(env.get("NAKADI_GRACEFUL_TIMEOUT",
                           gunicorn_variables()["NAKADI_GRACEFUL_TIMEOUT"])))


def app_routes() -> set[str]:
    app = create_app(Settings(database_url="postgresql://nobody@127.0.0.1:1/none",
                              zookeeper="127.0.0.1:1"))
    return {rule.rule for rule in app.url_map.iter_rules()}


# -- Dockerfile ---------------------------------------------------------------------

def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuations joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines
            if line and not line.startswith("#")]


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile()
    start = max(i for i, (op, _) in enumerate(instructions) if op == "FROM")
    return instructions[start:]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for op, args in final_stage():
        if op == "ENV":
            env.update(pair.split("=", 1) for pair in shlex.split(args))
    return env


def test_hadolint_accepts_the_dockerfile():
    result = subprocess.run([BIN / "hadolint", "Dockerfile"], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_is_pinned_non_root_and_runs_gunicorn_under_an_init():
    stage = dict(final_stage())
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", stage["FROM"]), stage["FROM"]
    assert stage["USER"] not in ("root", "0")
    assert json.loads(stage["ENTRYPOINT"]) == ["/usr/bin/tini", "--"]
    assert json.loads(stage["CMD"]) == GUNICORN_COMMAND
    # The command's target is the WSGI module, and the conf file is in the workdir.
    assert (ROOT / "app" / "wsgi.py").exists()
    copied = [args.split() for op, args in final_stage() if op == "COPY"]
    assert ["gunicorn.conf.py", "./"] in copied
    assert stage["HEALTHCHECK"].endswith('CMD ["python", "-m", "deploy.healthcheck"]')
    assert_true_variables(image_env(), "Dockerfile")
    port = image_env()["NAKADI_BIND"].rsplit(":", 1)[1]
    assert stage["EXPOSE"] == port


def test_the_build_stage_copies_what_the_package_needs(tmp_path):
    """Build the wheel from exactly the files the Dockerfile copies: it must hold every
    module, SQL migration and data file (the API's definition, the archiver's log
    configuration), so the image cannot lack one."""
    context = tmp_path / "context"
    context.mkdir()
    for op, args in dockerfile():
        if op == "COPY" and not args.startswith("--from"):
            *sources, _ = args.split()
            for source in sources:
                assert (ROOT / source).exists(), f"the Dockerfile copies a missing {source}"
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, context / source,
                                    ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy(ROOT / source, context / source)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", tmp_path / "wheel", context],
                   check=True, capture_output=True)
    wheel, = (tmp_path / "wheel").glob("*.whl")
    packaged = set(zipfile.ZipFile(wheel).namelist())
    needed = {str(path.relative_to(ROOT)) for folder in ("app", "workers", "sql")
              for path in (ROOT / folder).rglob("*")
              if path.suffix in (".py", ".sql", ".yaml", ".properties")
              and "__pycache__" not in path.parts}
    needed.add("deploy/healthcheck.py")
    assert needed - packaged == set()


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_closure(requirements: list[str]) -> set[str]:
    """The distributions a plain ``pip install`` of these requirements brings: each
    with its own requirements, extras followed, markers evaluated."""
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [Requirement(line) for line in requirements]
    while pending:
        requirement = pending.pop()
        key = (normalized(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        for line in importlib.metadata.requires(requirement.name) or []:
            child = Requirement(line)
            if child.marker is None or any(child.marker.evaluate({"extra": extra})
                                           for extra in requirement.extras or {""}):
                pending.append(child)
    return {name for name, _ in seen}


def imported_modules(path: Path) -> set[str]:
    """The top-level modules a source file imports, wherever in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_package_declares_every_module_it_runs_with():
    """What the image runs (the broker, gunicorn's config and its gevent worker) imports
    only modules that installing the package brings: the image installs nothing else."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    requirements = [line for line in config["options"]["install_requires"].splitlines()
                    if line.strip() and not line.strip().startswith("#")]
    installed = installed_closure(requirements)
    sources = [ROOT / "gunicorn.conf.py", ROOT / "deploy" / "healthcheck.py",
               *(ROOT / "app").rglob("*.py"), *(ROOT / "sql").glob("*.py"),
               *(ROOT / "workers").glob("*.py"),
               Path(importlib.util.find_spec("gunicorn.workers.ggevent").origin)]
    owners = importlib.metadata.packages_distributions()
    missing = {}
    for source in sources:
        for module in imported_modules(source) - set(sys.stdlib_module_names) - {
                "app", "workers", "sql", "deploy", "gunicorn"}:
            distributions = {normalized(name) for name in owners.get(module, [])}
            if not distributions & installed:
                missing[module] = str(source.relative_to(ROOT) if ROOT in source.parents
                                      else source)
    assert missing == {}, "imported but not brought by install_requires"


# -- docker-compose -----------------------------------------------------------------

def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def test_compose_file_follows_the_compose_specification():
    result = subprocess.run(
        [BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec",
         DEPLOY / "docker-compose.yml"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_broker_waits_for_healthy_dependencies_it_is_configured_with():
    services = compose()["services"]
    broker = services["nakadi"]
    env = broker["environment"]
    assert_true_variables(env, "docker-compose.yml")
    dependencies = {"postgres", "zookeeper", "kafka"}
    assert broker["depends_on"] == {name: {"condition": "service_healthy"}
                                    for name in dependencies}
    assert all(services[name]["healthcheck"]["test"] for name in dependencies)
    # The addresses name the services of this file, on the ports they listen on.
    assert env["NAKADI_DATABASE_URL"].split("@")[1].startswith("postgres:5432/")
    assert env["NAKADI_ZOOKEEPER"] == "zookeeper:2181"
    kafka_env = services["kafka"]["environment"]
    assert f"PLAINTEXT://{env['NAKADI_KAFKA_BOOTSTRAP_SERVERS']}" == \
        kafka_env["KAFKA_ADVERTISED_LISTENERS"]
    assert "ZOOKEEPER" not in " ".join(kafka_env)  # KRaft: Kafka needs no ZooKeeper
    port = image_env()["NAKADI_BIND"].rsplit(":", 1)[1]
    assert [mapping.rsplit(":", 1)[1] for mapping in broker["ports"]] == [port]
    grace = int(broker["stop_grace_period"].removesuffix("s"))
    assert grace > graceful_timeout(env)


# -- Kubernetes ---------------------------------------------------------------------

def manifests() -> dict[str, dict]:
    """The resources kustomization.yaml lists, by kind."""
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in K8S.glob("*.yaml")
                                    if p.name != "kustomization.yaml")
    return {doc["kind"]: doc for name in listed
            for doc in yaml.safe_load_all((K8S / name).read_text())}


@pytest.mark.parametrize("name", sorted(p.name for p in K8S.glob("*.yaml")
                                        if p.name != "kustomization.yaml"))
def test_kubernetes_schemas_accept_the_manifest(name):
    result = subprocess.run([BIN / "kubernetes-validate", "--strict", "--quiet", K8S / name],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_kubernetes_deployment_matches_the_app():
    resources = manifests()
    config = resources["ConfigMap"]["data"]
    pod = resources["Deployment"]["spec"]["template"]["spec"]
    container, = pod["containers"]
    env = dict(config) | {item["name"]: "postgresql://u:p@db:5432/nakadi"
                          for item in container["env"]}
    assert_true_variables(env, "deploy/k8s")
    assert {ref["configMapRef"]["name"] for ref in container["envFrom"]} == \
        {resources["ConfigMap"]["metadata"]["name"]}

    port = int(str(env.get("NAKADI_BIND", image_env()["NAKADI_BIND"])).rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": port}
    routes = app_routes()
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        check = container[probe]["httpGet"]
        # Not /health: a dependency's outage would fail every pod at once.
        assert check["path"] == "/health/live" and check["path"] in routes
        assert check["port"] in ports

    stop_pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] >= stop_pause + graceful_timeout(env) + 5
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"mountPath": "/tmp", "name": "tmp"} in container["volumeMounts"]


def test_kubernetes_service_pdb_and_ingress_reach_the_pods():
    resources = manifests()
    pod_labels = resources["Deployment"]["spec"]["template"]["metadata"]["labels"]
    service = resources["Service"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert resources["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() \
        <= pod_labels.items()
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]

    ingress = resources["Ingress"]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    notes = ingress["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    assert notes[prefix + "proxy-buffering"] == "off"
    # Quiet streams are not cut: a stream is silent at most stream_timeout.
    assert int(notes[prefix + "proxy-read-timeout"]) > MAX_STREAM_TIMEOUT_S
    assert int(notes[prefix + "proxy-send-timeout"]) > MAX_STREAM_TIMEOUT_S
    body_limit = int(notes[prefix + "proxy-body-size"].removesuffix("m")) * 2**20
    max_batch = Settings.from_env(resources["ConfigMap"]["data"]).max_batch_bytes
    assert body_limit >= max_batch


def test_yamllint_accepts_every_deploy_file():
    files = [DEPLOY / "docker-compose.yml", *sorted(K8S.glob("*.yaml"))]
    result = subprocess.run([BIN / "yamllint", "--strict", "-d", YAMLLINT_CONFIG, *files],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
