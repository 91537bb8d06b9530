"""Starting Spark on the process's Ray runtime, through RayDP.

    from spark_bridge.session import start_spark, stop_spark
    spark = start_spark()            # 1 executor x 1 core x 1 GB by default
    ...
    stop_spark()

Ray is started (or attached to) first with :func:`engine.runtime.ray_runtime.ensure_ray`,
whose job config carries the ``--add-opens`` the Ray Java workers need on Java 17.
The Spark JVMs (driver, executors, RayDP's app master) get :data:`SPARK_JAVA17_OPENS`:
the engine's list plus ``java.math`` and a few more packages. Without ``java.math``
the app master (a Ray Java actor) dies with ``Check failed: objects_valid`` the first
time its FST serializer is used (``ray.data.from_spark``): see docs/SPARK.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

from engine.exceptions import ServiceError
from engine.runtime.ray_runtime import JAVA17_OPENS, ensure_ray

if TYPE_CHECKING:  # pyspark is imported where a session is used
    from pyspark.sql import SparkSession

__all__ = ["SPARK_JAVA17_OPENS", "default_configs", "start_spark", "stop_spark", "active_spark"]

#: JAVA17_OPENS plus the packages RayDP's app master and Spark's JVMs also reflect into.
SPARK_JAVA17_OPENS: list[str] = list(
    dict.fromkeys(
        JAVA17_OPENS
        + [
            "--add-opens=java.base/java.math=ALL-UNNAMED",
            "--add-opens=java.base/java.text=ALL-UNNAMED",
            "--add-opens=java.base/java.time=ALL-UNNAMED",
            "--add-opens=java.base/java.util.regex=ALL-UNNAMED",
            "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
            "--add-opens=java.sql/java.sql=ALL-UNNAMED",
            "-Djdk.reflect.useDirectMethodHandle=false",
            "-Dio.netty.tryReflectionSetAccessible=true",
        ]
    )
)

_lock = threading.Lock()
_spark: SparkSession | None = None


def default_configs() -> dict[str, str]:
    """Spark settings for a small machine (2 cores): the JVM options, few shuffle partitions, Arrow on."""
    opts = " ".join(SPARK_JAVA17_OPENS)
    return {
        "spark.ray.raydp_app_master.extraJavaOptions": opts,
        "spark.executor.extraJavaOptions": opts,
        "spark.driver.extraJavaOptions": opts,
        "spark.driver.memory": "1g",
        # executors start Python workers (UDFs, local data): this interpreter, not the PATH's python3
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # Executors reserve no Ray CPU: reserved, they starve the Ray tasks that fetch and
        # analyze the moved blocks (2 executors x 1 core on 2 cores deadlock the move;
        # 1 leaves the analyze one core), while they sit idle once the data has moved.
        "spark.ray.raydp_spark_executor.actor.resource.cpu": "0",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }


def _check_java() -> None:
    java = shutil.which("java")
    if java is None:
        raise ServiceError("Spark needs Java 17 on the PATH (java not found); install openjdk-17-jre-headless")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except Exception as exc:
        raise ServiceError(f"could not run {java} -version: {exc}") from exc
    text = (out.stderr or out.stdout).strip()
    if out.returncode != 0:
        raise ServiceError(f"{java} -version failed: {text.splitlines()[0] if text else out.returncode}")


def first_line(exc: BaseException) -> str:
    """A one-line description of a JVM/py4j error (its Java exception, not the whole trace)."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            top = _clip(str(java.toString()))
            root = java
            for _ in range(20):
                cause = root.getCause()
                if cause is None:
                    break
                root = cause
            if root is java:
                return top
            return f"{top} (root cause: {_clip(str(root.toString()))})"
        except Exception:
            pass
    text = str(exc).strip()
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("at ")]
    return " ".join(lines[:2])[:500] if lines else type(exc).__name__


def _clip(text: str) -> str:
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("at ")]
    return " ".join(lines[:3])[:400]


def start_spark(
    app_name: str = "metastore",
    num_executors: int = 1,
    executor_cores: int = 1,
    executor_memory: str = "1g",
    configs: dict[str, str] | None = None,
) -> SparkSession:
    """A SparkSession whose executors are Ray actors (RayDP); returns the running one if started.

    ``configs`` override :func:`default_configs` key by key. Raises ServiceError with
    one readable line if Java, Ray or RayDP cannot start.
    """
    global _spark
    with _lock:
        if _spark is not None:
            return _spark
        _check_java()
        ensure_ray()
        try:
            import raydp
        except ImportError as exc:
            raise ServiceError(f"RayDP is not installed ({exc}); pip install raydp==1.6.5 pyspark==3.5.7") from exc
        merged = default_configs()
        merged.update(configs or {})
        # PySpark sends its Python executable with every Python function (createDataFrame
        # from local data, UDFs): from PYSPARK_PYTHON, else "python3" on the executor's PATH.
        os.environ.setdefault("PYSPARK_PYTHON", merged["spark.pyspark.python"])
        try:
            spark = raydp.init_spark(
                app_name=app_name,
                num_executors=num_executors,
                executor_cores=executor_cores,
                executor_memory=executor_memory,
                configs=merged,
            )
        except Exception as exc:
            try:
                raydp.stop_spark()
            except Exception:
                pass
            raise ServiceError(
                f"could not start Spark on Ray (RayDP, {num_executors} executor(s) x {executor_cores} core(s) x "
                f"{executor_memory}): {type(exc).__name__}: {first_line(exc)}"
            ) from exc
        spark.sparkContext.setLogLevel("ERROR")
        _spark = spark
        return spark


def active_spark() -> SparkSession | None:
    """The session start_spark created, or None."""
    return _spark


def stop_spark() -> None:
    """Stop the RayDP Spark session (its executors and app master); Ray keeps running."""
    global _spark
    with _lock:
        if _spark is None:
            return
        import raydp

        try:
            raydp.stop_spark()
        except Exception as exc:
            raise ServiceError(f"could not stop Spark: {type(exc).__name__}: {first_line(exc)}") from exc
        finally:
            _spark = None
