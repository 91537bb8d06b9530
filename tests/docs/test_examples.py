"""Every code example of README.md and docs/ runs against the code as it is.

Python blocks run in a subprocess with the repository on PYTHONPATH; shell blocks of
``metastore ...`` lines run through ``python -m engine``'s entry (one process per block,
the lines in order, each must exit 0). They run in a directory made once per session
(``doc_store``), the one the docs assume: the sample table at ``data/sales``, analyzed into
``.metastore`` as ``sales``; the tables are small, so analyses and computed subsets run in
the example's own process (``--runtime auto``), as they do for a user trying the docs; an
example that asks for Ray (``--runtime ray``, ``--frequencies redis``, ``import ray``)
attaches (RAY_ADDRESS) to one Ray started in that directory. Examples talk to a Flight server
of that store (its address replaces the default ``127.0.0.1:8815``).
A ``metastore ui`` or ``metastore serve`` line runs until stopped: it is started in the
background on a free port, the block goes on once it answers (its later lines talk to the
newest Flight server), and it is stopped with Ctrl-C at the end (tests/docs/servers.py). The
tables in other places the docs name are made small (tests/docs/lakes.py): Iceberg at
``warehouse/db/events`` (= ``db.events`` of the catalog ``prod``), Delta at ``lake/orders``,
Hudi at ``lake/trips`` (from ../shared/lake-tables; without them its lines are left out),
``s3://bucket/...`` on the S3-compatible test server; ``tokens.txt``, ``cert.pem`` and
``key.pem`` are a token file and a self-signed certificate.
A block that cannot run here (a remote cluster or host, a catalog elsewhere) says why
on the line before it: ``<!-- not run: reason -->``. A block that needs Spark and the table
db.sales of its catalog says ``<!-- run with Spark: tests/spark_bridge/test_doc_examples.py -->``
and runs there, in the test run's Spark session; test_spark_examples_are_run_by_their_test
checks that test knows every such block.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs import lakes, servers
from tests.docs.examples import PYTHON, REPO, SHELL, Example, blocks, documents, examples, parse_command, shell_commands, spark_examples

EXAMPLES = examples()
#: The JSON blocks that are Flight request documents (they name a "kind").
REQUESTS = [b for path in documents() for b in blocks(path) if b.language == "json" and '"kind"' in b.code]
RUNNABLE = [e for e in EXAMPLES if e.not_run is None and e.spark_test is None]
#: the one test that runs the blocks marked ``<!-- run with Spark: ... -->``
SPARK_TEST = "tests/spark_bridge/test_doc_examples.py"
DEFAULT_SERVER = "grpc://127.0.0.1:8815"
TIMEOUT = 300

#: Runs ``metastore ARGS`` for each ARGS of a JSON list, as ``python -m engine ARGS`` would,
#: in one process; stops at the first one that does not exit 0.
_DRIVER = """
import json, runpy, sys
for argv in json.loads(sys.argv[1]):
    print("$ metastore " + " ".join(argv), flush=True)
    sys.argv = ["metastore", *argv]
    try:
        runpy.run_module("engine", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    if code != 0:
        print(f"exit code {code}: metastore {' '.join(argv)}", file=sys.stderr)
        sys.exit(code)
"""


#: A local Ray runtime started in the examples' directory (its workers resolve their relative
#: paths there): prints its address, then holds it until stdin closes.
_RAY_HOST = """
import sys
import ray
from engine.runtime.ray_runtime import ensure_ray
ensure_ray(num_cpus=2)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="session")
def doc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the examples run in: data/sales, the sample table (4,000 rows, 4 partitions)."""
    from engine.sample import generate_table

    root = tmp_path_factory.mktemp("docs")
    generate_table(str(root / "data" / "sales"), rows=4_000, partitions=4, seed=0)
    return root


@pytest.fixture(scope="session")
def doc_ray(doc_dir: Path) -> Iterator[str]:
    """The examples' Ray (see _RAY_HOST); its address."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    host = subprocess.Popen(
        [sys.executable, "-c", _RAY_HOST], cwd=doc_dir, env={**env, **_catalog_environment(doc_dir), "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        address = host.stdout.readline().strip() if host.stdout else ""
        assert address, "the examples' Ray did not start"
        yield address
    finally:
        if host.stdin:
            host.stdin.close()
        try:
            host.wait(timeout=60)
        except subprocess.TimeoutExpired:
            host.kill()
            host.wait()


def _catalog_environment(doc_dir: Path) -> dict[str, str]:
    """The pyiceberg catalog ``prod`` the examples name (``--catalog prod``): SQL on sqlite in doc_dir."""
    root = doc_dir / "iceberg"
    return {
        "PYICEBERG_CATALOG__PROD__TYPE": "sql",
        "PYICEBERG_CATALOG__PROD__URI": f"sqlite:///{root}/catalog.db",
        "PYICEBERG_CATALOG__PROD__WAREHOUSE": f"file://{root}/warehouse",
    }


@pytest.fixture(scope="session")
def iceberg_events(doc_dir: Path) -> None:
    """The Iceberg table db.events of catalog ``prod``: data/sales's rows, partitioned by ``part``,
    at ``warehouse/db/events`` (the location the docs analyze it by)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    environment = _catalog_environment(doc_dir)
    (doc_dir / "iceberg").mkdir(exist_ok=True)
    catalog = SqlCatalog("prod", uri=environment["PYICEBERG_CATALOG__PROD__URI"], warehouse=environment["PYICEBERG_CATALOG__PROD__WAREHOUSE"])
    parts = []
    for file in sorted((doc_dir / "data" / "sales").rglob("*.parquet")):
        rows = pq.read_table(file)
        parts.append(rows.append_column("part", pa.array([file.parent.name.split("=")[1]] * len(rows), pa.string())))
    rows = pa.concat_tables(parts)
    catalog.create_namespace_if_not_exists("db")
    table = catalog.create_table("db.events", schema=rows.schema, location=f"file://{doc_dir}/warehouse/db/events")
    with table.update_spec() as spec:
        spec.add_identity("part")
    table.append(rows)


@pytest.fixture(scope="session")
def delta_orders(doc_dir: Path) -> None:
    """The Delta table lake/orders (tests/docs/lakes.py)."""
    lakes.write_orders(doc_dir)


@pytest.fixture(scope="session")
def hudi_trips(doc_dir: Path) -> bool:
    """The Hudi table lake/trips, when the shared tables are there (tests/docs/lakes.py)."""
    return lakes.write_trips(doc_dir)


@pytest.fixture(scope="session")
def s3_table(doc_dir: Path, s3_server: str) -> None:
    """s3://bucket/table: data/sales on the S3-compatible server (its variables set for the session)."""
    lakes.upload_sales(doc_dir, s3_server)


@pytest.fixture(scope="session")
def credentials(doc_dir: Path) -> None:
    """tokens.txt, cert.pem and key.pem in the examples' directory (tests/docs/servers.py)."""
    servers.write_credentials(doc_dir)


@pytest.fixture(scope="session")
def analyzed_store(doc_dir: Path) -> Path:
    """data/sales analyzed into doc_dir/.metastore three times: transactions 1 to 3 exist for
    the time travel examples (the second and third carry every partition over). Returns a
    copy of that store, which every example starts from."""
    _run_in(doc_dir, [sys.executable, "-c", _DRIVER, json.dumps([["analyze", "data/sales"]] * 3)], _environment(None, None), "setup")
    pristine = doc_dir.parent / f"{doc_dir.name}-store"
    shutil.copytree(doc_dir / ".metastore", pristine)
    return pristine


@pytest.fixture
def doc_store(doc_dir: Path, analyzed_store: Path) -> Path:
    """doc_dir with .metastore as the three analyses left it, whatever earlier examples did
    to it (they run in the same directory: the examples' Ray resolves relative paths there)."""
    shutil.rmtree(doc_dir / ".metastore")
    shutil.copytree(analyzed_store, doc_dir / ".metastore")
    return doc_dir


@pytest.fixture
def doc_server(doc_store: Path) -> Iterator[str]:
    """A Flight server of the example's store (fresh, as the store is) on a free port; its location."""
    from flight_server.server import MetastoreFlightServer, ServerConfig

    server = MetastoreFlightServer(ServerConfig(store=str(doc_store / ".metastore"), host="127.0.0.1", port=0))
    try:
        yield server.location.replace("grpc+tcp://", "grpc://")
    finally:
        server.shutdown()


def _environment(ray_address: str | None, server: str | None, catalog: dict[str, str] | None = None) -> dict[str, str]:
    """The examples' environment: attached to the examples' Ray only when ``ray_address`` is
    given (_needs_ray); else, as a user trying the docs on the sample table, --runtime auto
    runs the small table's work in process and Ray never starts."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update({**(catalog or {}), "PYTHONPATH": str(REPO), "COLUMNS": "120"})
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    if server:
        env["METASTORE_FLIGHT"] = server
    return env


def _run_in(cwd: Path, argv: list[str], env: dict[str, str], what: str) -> None:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, f"{what}:\n{proc.stderr[-3000:]}"


def _needs_catalog(example: Example) -> bool:
    return "--catalog prod" in example.code


#: what asks for Ray whatever the table's size (docs/SCALING.md, "When Ray starts")
_RAY_NEEDLES = ("--runtime ray", 'runtime="ray"', "runtime='ray'", "--frequencies redis", "import ray", "ray.init")


def _ray_address(example: Example, request: pytest.FixtureRequest) -> str | None:
    """The examples' Ray for an example that needs it, else None (the fixture is not started)."""
    return request.getfixturevalue("doc_ray") if any(n in example.code for n in _RAY_NEEDLES) else None


def _needs_server(example: Example) -> bool:
    return "8815" in example.code or "metastore query" in example.code


#: what a shell block names -> the fixture that makes it
_MADE_BY = {
    "--catalog prod": "iceberg_events",
    "warehouse/db/events": "iceberg_events",
    "lake/orders": "delta_orders",
    "s3://": "s3_server",
    "s3://bucket/table": "s3_table",
    "tokens.txt": "credentials",
    "cert.pem": "credentials",
}


def test_every_example_runs_or_says_why() -> None:
    """A shell block is runnable when each of its commands is a metastore command; any other
    block (make, a benchmark) carries its reason not to run (`export VAR=value` and `VAR=value metastore ...` are shell
    the examples use too)."""
    unexplained = []
    for example in EXAMPLES:
        if example.language not in SHELL or example.not_run is not None:
            continue
        commands = shell_commands(example.code)
        if not commands or any(parse_command(c) is None for c in commands):
            unexplained.append(example.id)
    assert not unexplained, f"shell blocks with other commands than metastore and no <!-- not run: reason -->: {unexplained}"


def test_spark_examples_are_run_by_their_test() -> None:
    """Every block marked ``<!-- run with Spark: TEST -->`` is a Python block that TEST (the
    Spark test) has a check for, and the Spark test checks no block that is gone: no block
    silently stops running when its marker is added, or when blocks move or are removed."""
    from tests.spark_bridge.test_doc_examples import CHECKS

    marked = spark_examples()
    wrong = {key: (e.language, e.spark_test) for key, e in marked.items() if e.language != PYTHON or e.spark_test != SPARK_TEST}
    assert not wrong, f"blocks marked run with Spark must be python blocks run by {SPARK_TEST}: {wrong}"
    assert sorted(marked) == sorted(CHECKS), f"marked blocks {sorted(marked)} != the blocks {SPARK_TEST} checks {sorted(CHECKS)}"


@pytest.mark.parametrize("example", [e for e in RUNNABLE if e.language == PYTHON], ids=lambda e: e.id)
def test_python_example(example: Example, doc_store: Path, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue("doc_server") if _needs_server(example) else None
    code = example.code.replace(DEFAULT_SERVER, server) if server else example.code
    _run_in(doc_store, [sys.executable, "-c", code], _environment(_ray_address(example, request), server), example.id)


@pytest.mark.parametrize("example", [e for e in RUNNABLE if e.language in SHELL], ids=lambda e: e.id)
def test_shell_example(example: Example, doc_store: Path, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    commands = [parse_command(c) for c in shell_commands(example.code)]
    assert all(c is not None for c in commands), example.id
    serves = any(c is not None and c.arguments is not None and servers.subcommand(c.arguments) in servers.SERVERS for c in commands)
    for needle, fixture in _MADE_BY.items():
        if needle in example.code:
            request.getfixturevalue(fixture)
    if "lake/trips" in example.code and not request.getfixturevalue("hudi_trips"):
        commands = [c for c in commands if c is not None and "lake/trips" not in (c.arguments or [])]  # left out: no Hudi table here
    server = request.getfixturevalue("doc_server") if _needs_server(example) and not serves else None
    catalog = _catalog_environment(doc_store) if _needs_catalog(example) else None
    environment = _environment(_ray_address(example, request), server, catalog)
    pending: list[list[str]] = []
    running: list[servers.Server] = []

    def flush(extra: dict[str, str] | None = None) -> None:
        if pending:
            _run_in(doc_store, [sys.executable, "-c", _DRIVER, json.dumps(pending)], {**environment, **(extra or {})}, example.id)
            pending.clear()

    try:
        for command in commands:
            assert command is not None
            if command.arguments is None:  # export VAR=value
                flush()
                environment.update(command.environment)
            elif servers.subcommand(command.arguments) in servers.SERVERS:
                flush()
                log = (tmp_path / f"server-{len(running)}.log").open("w+b")
                running.append(servers.start(command.arguments, {**environment, **command.environment}, doc_store, log))
                if running[-1].kind == "serve":
                    environment["METASTORE_FLIGHT"] = running[-1].location  # the later lines ask the newest server
            else:
                pending.append(command.arguments)
                if command.environment:
                    flush(command.environment)
        flush()
    except BaseException:
        for started in running:
            started.kill()
        raise
    for started in reversed(running):
        started.stop()


def _documents_of(code: str) -> list[dict[str, object]]:
    """A block of one JSON document, or of one document a line."""
    try:
        return [json.loads(code)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in code.splitlines() if line.strip()]


@pytest.mark.parametrize("example", REQUESTS, ids=lambda e: e.id)
def test_flight_request_example(example: Example) -> None:
    """A request document shown in the docs is one the server accepts (parsed as it would be)."""
    from flight_server.requests import parse

    for document in _documents_of(example.code):
        assert parse(document) is not None
