"""A Spark standalone cluster whose Python has no Airflow, ``spark-submit`` onto it, for tests.

A master and two workers as child processes on 127.0.0.1. Their Python is a virtual environment of
its own, :func:`airflow_free_python`: PySpark, pyarrow and the Azure SDK (this environment's installed
files, linked) and no Airflow, as on a Spark cluster that knows nothing of the scheduler. They run from
the Spark distribution that environment's ``pyspark`` carries (jars, ``bin/spark-class``; nothing is
downloaded), and nothing else of this environment is on their path: Python workers import
``pyspark`` from that distribution's ``python/lib/pyspark.zip``, which Spark puts first on their
``PYTHONPATH``. The provider reaches the cluster as a job ships its code, a ``--py-files`` zip
(:func:`provider_py_files`), never installed there. A Spark Connect server on the cluster is
:class:`tests.support.spark_connect.SparkConnectServer` with ``master=cluster.url``.

Which process to kill. A submitted application's driver is the ``spark-submit`` JVM, the
:func:`submit` ``Popen``'s own pid (``spark-submit`` execs it), which runs the Python driver as its
child (:func:`driver_python_pid`). SIGKILL of the JVM ends the application: the Python driver goes
with it, the master removes the application and the workers its executors within seconds. SIGKILL of
the Python driver ends the JVM at once (exit code 137); SIGSTOP of it stalls the job's own code
while the JVM keeps the executors. An executor is a ``CoarseGrainedExecutorBackend`` JVM a worker
starts (:meth:`StandaloneCluster.executor_pids`, :meth:`StandaloneCluster.kill_executor`): killed,
the worker starts another and the driver reruns the lost tasks. Its Python workers are a
``pyspark.daemon`` and that daemon's forks, in a process group of their own.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import psutil
from eventhubs_local.ports import free_port, wait_listening
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from airflow_provider_eh.testing.crash import CLAIM_ENV, PAUSE_ENV
from scripts import release

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"

#: what the cluster's Python holds besides their dependencies, at this environment's versions
# what a Spark runtime's Python has: PySpark with its ``connect`` extra (a Spark Connect server runs a query's
# ``foreachBatch`` function in a Python that is a Connect client of it), the Azure SDKs and ``deltalake``
AIRFLOW_FREE_PACKAGES = ("pyspark", "pyarrow", "pandas", "numpy", "grpcio", "grpcio-status", "googleapis-common-protos",
                         "zstandard", "azure-eventhub", "azure-storage-blob", "azure-identity", "azure-core", "deltalake")
_COMPLETE = "complete"

# JVMs that start quickly (C1 only) and collect serially: up to eight of them share two cores.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: an application on the cluster (a submitted job, the Connect server): one single-core executor on
#: each worker (the master spreads executors out), and no task before both registered, so that a job
#: runs on both workers; small, without a UI, logging warnings only. :meth:`StandaloneCluster.app_conf`
#: adds the cluster's class archive to the JVM options.
APP_CONF: dict[str, str] = {
    "spark.cores.max": "2",
    "spark.executor.cores": "1",
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
    "spark.executor.memory": "512m",
    "spark.executor.extraJavaOptions": JVM_OPTIONS,
    "spark.driver.memory": "512m",
    "spark.driver.extraJavaOptions": JVM_OPTIONS,
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.log.level": "WARN",
}
# What a PySpark application's JVM loads (SQL, a Python UDF, local executors), for the class archive
ARCHIVE_APP = """
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

spark = SparkSession.builder.getOrCreate()
spark.range(0, 4, 1, 2).select(udf(lambda i: str(i), "string", useArrow=False)("id")).collect()
spark.stop()
"""


# what the master's web UI answers while it starts, or under load: a refused or reset connection, a 404, an
# answer cut short (http.client's errors), or a page that is not yet JSON
STARTING_UI = (OSError, ValueError, http.client.HTTPException)


def airflow_free_distributions() -> list[importlib.metadata.Distribution]:
    """:data:`AIRFLOW_FREE_PACKAGES` and what they require (their extras left out), as installed beside
    this interpreter: what ``pip install`` of those packages puts in an environment, at these versions."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(AIRFLOW_FREE_PACKAGES)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        dist = found[name] = importlib.metadata.distribution(name)
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return sorted(found.values(), key=lambda dist: canonicalize_name(dist.metadata["Name"]))


def _link_distribution(dist: importlib.metadata.Distribution, site: Path) -> None:
    """Symlink what ``dist`` installed in its ``site-packages`` into ``site``: each of its top-level packages,
    modules and its ``.dist-info``; inside a namespace package that several distributions share (``azure``),
    only this distribution's part of it."""
    source = Path(str(dist.locate_file("")))
    for entry in sorted({Path(str(f)).parts[:2] for f in dist.files or [] if not str(f).startswith("..")}):
        top = source / entry[0]
        if len(entry) == 2 and top.is_dir() and not (top / "__init__.py").exists():  # a namespace package
            (site / entry[0]).mkdir(exist_ok=True)
            target, link = top / entry[1], site / entry[0] / entry[1]
        else:
            target, link = top, site / entry[0]
        if not link.exists() and not link.is_symlink():
            link.symlink_to(target)


def airflow_free_python(cache_dir: Path) -> Path:
    """The interpreter of a virtual environment with :func:`airflow_free_distributions` and no Airflow.

    Made once under ``cache_dir/<hash of the distributions and this Python's version>/`` and reused
    while its marker says it is complete: a change of a version makes another. Its ``site-packages``
    links those distributions' files installed beside this interpreter (the same files, in seconds,
    with no download and no build of PySpark's sdist); nothing else of this environment is on its path.
    A lock keeps two processes from making the same one.
    """
    distributions = airflow_free_distributions()
    pins = [f"{dist.metadata['Name']}=={dist.version}" for dist in distributions]
    key = hashlib.sha256(json.dumps([sys.version, pins]).encode()).hexdigest()[:16]
    venv = cache_dir / key
    python = venv / "bin" / "python"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = venv / _COMPLETE
        if marker.exists() and marker.read_text() == "\n".join(pins):
            return python
        shutil.rmtree(venv, ignore_errors=True)
        run = subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)],  # type: ignore[attr-defined]
                             capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            raise RuntimeError(f"python -m venv for the Airflow-free Python failed:\n{run.stderr[-3000:]}")
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True, env=clean_environment()).stdout.strip())
        for dist in distributions:
            _link_distribution(dist, site)
        check = subprocess.run([str(python), "-c", "import airflow"], capture_output=True, text=True, env=clean_environment())
        if "ModuleNotFoundError: No module named 'airflow'" not in check.stderr:
            raise RuntimeError(f"{venv} imports Airflow, it must not: {check.stderr[-1000:]}")
        marker.write_text("\n".join(pins))
    return python


def spark_class_archive(python: Path) -> Path:
    """A class data sharing archive of what a PySpark application's JVM loads from ``python``'s Spark,
    for every JVM of a cluster run from it (``-XX:SharedArchiveFile``, :attr:`StandaloneCluster.jvm_options`).

    A Spark JVM spends most of its start loading and verifying classes: with the archive the cluster's
    JVMs use about a third less CPU. Built once per Java build (a JVM of another build ignores it) by
    an application on ``local[1]`` whose JVM writes it at exit (``-XX:ArchiveClassesAtExit``), which
    takes as long as a few applications; kept beside ``python``'s environment.
    """
    home = spark_home_of(python)
    java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    if java is None:
        raise FileNotFoundError("no java on PATH and no JAVA_HOME: Spark needs Java 17 or later")
    build = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    key = hashlib.sha256(json.dumps([build, str(home)]).encode()).hexdigest()[:12]
    archive = Path(python).parents[1] / f"spark-classes-{key}.jsa"
    with open(archive.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return archive
        app = archive.with_suffix(".py")
        app.write_text(ARCHIVE_APP)
        written = archive.with_name(f"{archive.name}.partial")
        written.unlink(missing_ok=True)
        options = f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={written} -Xlog:cds*=off"
        run = subprocess.run([str(home / "bin" / "spark-submit"), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                              "--conf", f"spark.driver.extraJavaOptions={options}", str(app)],
                             env={**clean_environment(), "SPARK_HOME": str(home), "PYSPARK_PYTHON": str(python)},
                             cwd=archive.parent, capture_output=True, text=True, timeout=900)
        if run.returncode != 0 or not written.exists():
            raise RuntimeError(f"the Spark application that writes {archive.name} failed:\n{run.stderr[-3000:]}")
        written.rename(archive)
    return archive


def jvm_options(class_archive: Path | None) -> str:
    """:data:`JVM_OPTIONS`, with the :func:`spark_class_archive` ``class_archive`` if given (a JVM whose class path or
    Java build differs from the archive's starts without it, silently)."""
    return JVM_OPTIONS + (f" -XX:SharedArchiveFile={class_archive} -Xlog:cds*=off" if class_archive else "")


CRASH_SITE = Path(__file__).resolve().parent / "crash_site"


def paused_env(provider_zip: Path, claim: Path) -> dict[str, str]:
    """A driver whose sender pauses itself (SIGSTOP) once a partition's first SDK batch is acknowledged (the crash
    site's ``sitecustomize``, which imports the provider from the zip); ``claim`` gets the paused PID."""
    return {"PYTHONPATH": os.pathsep.join([str(CRASH_SITE), str(provider_zip)]), PAUSE_ENV: "mid_send:1",
            CLAIM_ENV: str(claim)}


def provider_py_files(dest: Path) -> Path:
    """The provider's wheel, built from the checkout as ``make release`` builds it, as a ``.zip`` for
    ``--py-files`` in ``dest`` (emptied first).

    The zip is the wheel, renamed (the package and its ``.dist-info``): Python imports from it on
    ``sys.path``, but Spark puts on the executors' ``sys.path`` only files ending ``.zip``, ``.egg``
    or ``.jar`` (``SparkContext.PACKAGE_EXTENSIONS``), not ``.whl``.
    """
    artifacts, _warnings = release.build(dest, release.DISTRIBUTIONS[:1])
    (wheel,) = [artifact for artifact in artifacts if artifact.suffix == ".whl"]
    return wheel.replace(wheel.with_suffix(".zip"))


def clean_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without what leads a child to this environment's
    packages or Spark: ``PYTHONPATH``, the virtual environment and its ``bin`` on ``PATH``, PySpark's
    and Spark's variables (a ``PYSPARK_GATEWAY_PORT`` would hand the child this process's JVM), and
    Airflow's settings (connections among them)."""
    env = dict(os.environ if base is None else base)
    for name in list(env):
        if name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") or name.startswith(("PYSPARK_", "SPARK_", "AIRFLOW", "_AIRFLOW")):
            del env[name]
    venv_bin = Path(sys.prefix) / "bin"
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != venv_bin)
    return env


def spark_home_of(python: str | os.PathLike[str]) -> Path:
    """The Spark distribution the ``pyspark`` installed for ``python`` carries (its ``bin``, ``jars``)."""
    run = subprocess.run([str(python), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                         capture_output=True, text=True, env=clean_environment(), timeout=60)
    home = Path(run.stdout.strip()) if run.returncode == 0 else None
    if home is None or not (home / "bin" / "spark-class").is_file():
        raise FileNotFoundError(f"{python} has no pyspark with Spark's jars and bin/: {run.stderr[-1000:]}")
    return home


class StandaloneCluster:
    """
    A Spark standalone master on ``127.0.0.1`` and ``workers`` workers; ``stop()`` ends them, their
    executors and the executors' Python workers.

    Every process runs in a process group of its own, with :func:`clean_environment`, and its output
    in ``location/<name>.log``; a worker's applications work in ``location/worker-<n>/<app>/<executor>``.

    :param location: working folder (logs, the workers' work dirs).
    :param python: the Python of the executors' workers (``PYSPARK_PYTHON``; an application's
        ``spark.pyspark.python`` overrides it), whose ``pyspark`` is the Spark the cluster runs.
    :param workers: how many workers.
    :param cores: each worker's cores (slots for executors, not the machine's).
    :param memory: each worker's memory for executors.
    :param class_archive: a :func:`spark_class_archive` of ``python``'s Spark for every JVM of the
        cluster and its applications (:meth:`app_conf`).
    """

    def __init__(self, location: str | os.PathLike[str], *, python: str | os.PathLike[str], workers: int = 2,
                 cores: int = 2, memory: str = "1g", class_archive: Path | None = None):
        self.location = Path(location)
        self.python = str(python)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.webui_port = free_port()
        self.spark_home = spark_home_of(python)
        # a JVM whose class path or Java build differs from the archive's starts without it, silently
        self.jvm_options = jvm_options(class_archive)
        self.master_proc: subprocess.Popen[bytes] | None = None
        self.worker_procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """What the cluster's processes and applications run with: :func:`clean_environment` and Spark's home."""
        return {**clean_environment(), "SPARK_HOME": str(self.spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": self.python, "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": self.jvm_options}

    def app_conf(self) -> dict[str, str]:
        """:data:`APP_CONF` with the cluster's JVM options, for an application's driver and executors."""
        return {**APP_CONF, "spark.executor.extraJavaOptions": self.jvm_options,
                "spark.driver.extraJavaOptions": self.jvm_options}

    def job_conf(self, python: Path, conf: Mapping[str, str] | None = None) -> dict[str, str]:
        """A submitted application's settings: :meth:`app_conf`, ``python`` for its driver and executors, ``conf``."""
        return {**self.app_conf(), "spark.pyspark.python": str(python), "spark.pyspark.driver.python": str(python),
                **(conf or {})}

    def start(self, timeout: float = 120) -> StandaloneCluster:
        """Start the master, then the workers; return once the master counts them all alive."""
        spark_class = str(self.spark_home / "bin" / "spark-class")
        self.location.mkdir(parents=True, exist_ok=True)
        try:
            self.master_proc = self._spawn("master", [spark_class, MASTER_CLASS, "--host", "127.0.0.1", "--port",
                                                      str(self.port), "--webui-port", str(self.webui_port)])
            wait_listening(self.master_proc, "127.0.0.1", self.port, timeout, what="the Spark master",
                           details=lambda: ":\n" + self.tail("master"), interval=0.5)
            for n in range(self.workers):
                work_dir = self.location / f"worker-{n}"
                work_dir.mkdir(exist_ok=True)
                self.worker_procs.append(self._spawn(f"worker-{n}", [
                    spark_class, WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(work_dir), "--webui-port", str(free_port()), self.url]))
            self._wait_for_workers(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        log = open(self.location / f"{name}.log", "ab")
        self._logs.append(log)
        return subprocess.Popen(argv, env=self.environment(), cwd=self.location, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def _wait_for_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for n, proc in enumerate(self.worker_procs):
                if proc.poll() is not None:
                    raise RuntimeError(f"Spark worker {n} exited with code {proc.returncode}:\n{self.tail(f'worker-{n}')}")
            try:
                alive = self.status().get("aliveworkers", 0)
            except STARTING_UI:  # the UI listens a moment before it serves /json/ (refused, 404 or half a page until then)
                alive = 0
            if alive == self.workers:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{alive} of {self.workers} Spark workers registered within {timeout}s:\n"
                                   + self.tail("master"))
            time.sleep(0.5)

    def status(self) -> dict[str, Any]:
        """The master's state as its web UI serves it (``aliveworkers``, ``workers``, ``activeapps``, ...)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=10) as response:
            return json.load(response)

    def worker_pids(self) -> list[int]:
        """The workers' JVMs, in the order of their numbers."""
        return [proc.pid for proc in self.worker_procs]

    def executor_pids(self, app_id: str | None = None) -> list[int]:
        """The executor JVMs (``CoarseGrainedExecutorBackend``) the workers run, of ``app_id`` only if given."""
        found = []
        for proc in self._descendants():
            try:
                cmdline = proc.cmdline()
            except psutil.Error:
                continue
            if EXECUTOR_CLASS in cmdline and (app_id is None or app_id in cmdline):
                found.append(proc.pid)
        return found

    def python_worker_pids(self) -> list[int]:
        """The executors' Python processes (``pyspark.daemon`` and the workers it forked)."""
        found = []
        for proc in self._descendants():
            try:
                if "pyspark.daemon" in proc.cmdline():  # the forks keep the daemon's command line
                    found.append(proc.pid)
            except psutil.Error:
                continue
        return found

    def kill_executor(self, app_id: str | None = None) -> int:
        """SIGKILL one executor JVM (of ``app_id`` if given): its worker reports it lost and the
        application's driver asks for another. Its pid."""
        pids = self.executor_pids(app_id)
        if not pids:
            raise LookupError(f"no executor{' of ' + app_id if app_id else ''} runs on the cluster")
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]

    def _descendants(self) -> list[psutil.Process]:
        found = []
        for pid in self.worker_pids():
            try:
                found += psutil.Process(pid).children(recursive=True)
            except psutil.Error:
                continue
        return found

    def stop(self) -> None:
        """End the workers (and what they started), then the master; kill whatever is left after 30 s."""
        leftovers = self._descendants()
        procs = [*self.worker_procs, *([self.master_proc] if self.master_proc else [])]
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
            try:  # the JVM if it did not end, and anything left in its group
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        # the executors' Python daemons leave the workers' groups (pyspark.daemon calls setpgid)
        for proc in leftovers:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(leftovers, timeout=10)
        for log in self._logs:
            log.close()
        self._logs.clear()

    def tail(self, name: str, chars: int = 4000) -> str:
        """The end of ``location/<name>.log`` (``master``, ``worker-0``, ...)."""
        path = self.location / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def submit(cluster: StandaloneCluster, app: Path, args: Sequence[str], *, py_files: Path, python: Path,
           conf: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """``spark-submit`` of the PySpark application ``app`` onto ``cluster`` in client mode, in a process group
    of its own, its output captured (text).

    The driver and the executors run ``python`` with :meth:`StandaloneCluster.app_conf` and ``conf``;
    ``py_files`` goes to the executors' ``sys.path`` and the driver's. The environment is
    :meth:`StandaloneCluster.environment` and ``env``: nothing of this environment's packages on ``PYTHONPATH``.
    """
    argv = [str(cluster.spark_home / "bin" / "spark-submit"), "--master", cluster.url, "--deploy-mode", "client",
            "--name", app.stem, "--py-files", str(py_files)]
    settings = cluster.job_conf(python, conf)
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    argv += [str(app), *args]
    return subprocess.Popen(argv, env={**cluster.environment(), **(env or {})}, cwd=cluster.location, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)


# SparkSubmitOperator as an Airflow worker runs it: the task's ``execute`` in a process of its own, which
# spark-submit's JVM (the driver) is a child of; exits non-zero when the job failed, as the task would.
OPERATOR_TASK = """
import json, sys
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

spec = json.loads(sys.argv[1])
SparkSubmitOperator(task_id="publish", conn_id="spark_cluster", **spec).execute(context={})
print("TASK SUCCEEDED", flush=True)
"""


def submit_with_operator(cluster: StandaloneCluster, app: Path, args: Sequence[str], *, py_files: Path, python: Path,
                         conf: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
                         ) -> subprocess.Popen[str]:
    """``SparkSubmitOperator`` (``apache-airflow-providers-apache-spark``) submitting ``app`` onto ``cluster`` in
    client mode: what :func:`submit` does, through the operator, its connection an ``AIRFLOW_CONN_`` variable.

    The task runs in this environment's Python (which has Airflow) in a session of its own, its output captured
    (the job's output arrives as the hook's log lines). ``env`` reaches the job through the operator's
    ``env_vars``, not the task's own environment. SIGKILL of the task's descendants is a killed driver
    (:func:`kill_driver`); the task then fails as Airflow's would, and a new call is its retry.
    """
    connection = {"conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster.port,
                  "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"}}
    home = cluster.location / "airflow-home"
    home.mkdir(exist_ok=True)
    task_env = {**cluster.environment(), "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW_CONN_SPARK_CLUSTER": json.dumps(connection),
                "PATH": os.pathsep.join([str(cluster.spark_home / "bin"), cluster.environment()["PATH"]])}
    spec = {"application": str(app), "application_args": list(args), "py_files": str(py_files), "name": app.stem,
            "conf": cluster.job_conf(python, conf),
            "env_vars": dict(env or {}) or None}
    return subprocess.Popen([sys.executable, "-c", OPERATOR_TASK, json.dumps(spec)], env=task_env,
                            cwd=cluster.location, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def kill_driver(task: subprocess.Popen[str]) -> list[int]:
    """SIGKILL the driver a :func:`submit_with_operator` task started (the ``spark-submit`` JVM and its Python),
    leaving the task to see its job fail. The killed pids."""
    try:
        driver = psutil.Process(task.pid).children(recursive=True)
    except psutil.Error:
        return []
    for proc in driver:
        try:
            proc.kill()
        except psutil.Error:
            pass
    return [proc.pid for proc in driver]


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (a child started with ``start_new_session=True``): a driver's
    JVM, its Python, and the ``pyspark.daemon`` processes that move to process groups of their own, which a
    process-group kill would leave running (a paused sender among them)."""
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid:
                proc.kill()
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass


def driver_python_pid(proc: subprocess.Popen[str], timeout: float = 60) -> int:
    """The Python driver of a :func:`submit` application: the child the ``spark-submit`` JVM (``proc.pid``)
    starts. SIGKILL or SIGSTOP it to crash or stall the job's own code; the JVM (``proc.pid``) then exits
    with it, or keeps the executors until the driver resumes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"spark-submit exited with code {proc.returncode} before its Python driver was found")
        for child in psutil.Process(proc.pid).children():
            try:
                if Path(child.cmdline()[0]).name.startswith("python"):
                    return child.pid
            except (psutil.Error, IndexError):
                continue
        time.sleep(0.2)
    raise TimeoutError(f"spark-submit (pid {proc.pid}) started no Python driver within {timeout}s")
