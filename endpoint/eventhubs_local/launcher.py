"""Starting the local endpoint as a process of its own: its command line, the start, the wait until it listens.

One launcher for every way the endpoint runs in the background: :class:`~eventhubs_local.EmulatorProcess`
(a child of a test, a benchmark or the demo, on free ports, stopping with its parent) and the
development stack (``python -m tests.support.stack up``: fixed ports, detached, it
outlives the command that started it). :func:`command` writes the command line of
``python -m eventhubs_local``, :func:`spawn` starts a command in a session of its own with
its output in a log file, and :func:`wait_ready` waits for the ready file the endpoint writes once it
listens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
DEFAULT_KEY = "local-event-hubs-key"
MODULE = "eventhubs_local"


def connection_string(host: str, port: int, key_name: str, key: str, hub: str | None = None) -> str:
    """The connection string the SDK needs (``UseDevelopmentEmulator=true`` means plain AMQP, no TLS)."""
    text = f"Endpoint=sb://{host}:{port};SharedAccessKeyName={key_name};SharedAccessKey={key};UseDevelopmentEmulator=true"
    return text + (f";EntityPath={hub}" if hub else "")


def command(
    data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0, admin_port: int = 0,
    hubs: Mapping[str, int] | None = None, consumer_groups: Mapping[str, Sequence[str]] | None = None,
    key_name: str = DEFAULT_KEY_NAME, key: str = DEFAULT_KEY,
    sas_rules: Mapping[str, tuple[str, Sequence[str]]] | None = None, require_auth: bool = False,
    websocket_port: int | None = None,
    tls: tuple[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
    registry_port: int | None = None, schema_groups: Mapping[str, tuple[str, str]] | None = None,
    ready_file: str | os.PathLike[str] | None = None, exit_with_parent: int | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """
    The command line of ``python -m eventhubs_local`` (this interpreter) for these options.

    :param hubs: hub name -> partition count, created at start.
    :param consumer_groups: hub name -> consumer groups created at start.
    :param key_name: the main key's name; :param key: the main key (it has every right).
    :param sas_rules: further keys: name -> (key, rights), rights among ``Send``, ``Listen``, ``Manage``
        (``Manage`` brings the other two), e.g. ``{"listen-only": ("key2", ["Listen"])}``.
    :param require_auth: validate SAS tokens (``--require-auth``); the keys and rules count only with it.
    :param websocket_port: also serve AMQP over WebSockets on this port (0: a free one; ``None``: not served).
    :param tls: PEM certificate and key of the WebSocket listener (``wss://``) and of the Schema Registry.
    :param registry_port: serve the Schema Registry over HTTPS on this port (0: a free one; ``None``: not
        served); needs ``tls``.
    :param schema_groups: schema group name -> (format, compatibility mode), created at start, e.g.
        ``{"orders": ("Avro", "Backward")}``.
    :param ready_file: where the endpoint writes its ports as JSON once it listens.
    :param exit_with_parent: the endpoint stops when the process with this id is gone (``None``: it lives on).
    :param extra_args: further arguments, as ``python -m eventhubs_local --help`` lists them.
    """
    cmd = [sys.executable, "-m", MODULE, "--host", host, "--port", str(port), "--admin-port", str(admin_port),
           "--data-dir", str(data_dir)]
    if ready_file is not None:
        cmd += ["--ready-file", str(ready_file)]
    cmd += ["--sas-key-name", key_name, "--sas-key", key]
    for rule, (rule_key, rights) in (sas_rules or {}).items():
        cmd += ["--sas-rule", f"{rule}={rule_key}:{','.join(rights)}"]
    if require_auth:
        cmd.append("--require-auth")
    if exit_with_parent is not None:
        cmd += ["--exit-with-parent", str(exit_with_parent)]
    if websocket_port is not None:
        cmd += ["--websocket-port", str(websocket_port)]
    if tls:
        cmd += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
    if registry_port is not None:
        cmd += ["--registry-port", str(registry_port)]
    for group, (fmt, compatibility) in (schema_groups or {}).items():
        cmd += ["--schema-group", f"{group}:{fmt}:{compatibility}"]
    for name, partitions in (hubs or {}).items():
        cmd += ["--hub", f"{name}:{partitions}"]
    for hub, groups in (consumer_groups or {}).items():
        for group in groups:
            cmd += ["--consumer-group", f"{hub}:{group}"]
    return cmd + list(extra_args)


def spawn(
    argv: Sequence[str], log_path: str | os.PathLike[str], *, cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen[bytes]:
    """
    Start ``argv`` in a session of its own (a Ctrl-C or a signal to the caller's group does not reach it),
    its output and errors appended to ``log_path``, and no input.

    :param cwd: the working directory (default: the caller's).
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:  # the child keeps its own handle
        return subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, start_new_session=True)


def wait_ready(
    proc: subprocess.Popen[bytes], ready_file: str | os.PathLike[str], log_path: str | os.PathLike[str], timeout: float,
) -> dict[str, Any]:
    """
    What the endpoint wrote to ``ready_file`` once it listens (``host``, ``port``, ``admin_port``, ``pid``,
    ``websocket_port``, ``registry_port``). Raises ``RuntimeError`` when it exits first and ``TimeoutError`` (after killing
    it) when it is not ready within ``timeout`` seconds; both end with the tail of its log.
    """
    ready_path, log_path = Path(ready_file), Path(log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"emulator exited with code {proc.returncode} during start; see {log_path}:\n"
                               + tail(log_path))
        try:
            return json.loads(ready_path.read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    raise TimeoutError(f"emulator not ready within {timeout}s; see {log_path}:\n" + tail(log_path))


def tail(path: str | os.PathLike[str], lines: int = 20) -> str:
    """The last ``lines`` lines of a log file ("" when it cannot be read)."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
