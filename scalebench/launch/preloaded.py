"""A rank's benchopt process forked from a preloaded server instead of a fresh interpreter.

A run's process spends most of its start-up importing torch, deepinv and benchopt (about 4.4
of the 7 s of CPU of a rank of a 2D CT experiment of 40 iterations). A process that starts
many short runs, a tuning worker running one trial after another, keeps one server
(``scalebench.benchopt_glue.server``, started by ``serving``) that imported them once; a
rank (``rank_entry``) whose environment names the server (SERVER_VARIABLE) asks it for its
benchopt process, which the server forks. The forked process runs the same command: the same
arguments, environment and working directory, its output on the rank's pipe, in a session of
its own; the rank forwards signals to it as before, and it gets SIGTERM when the rank that
asked for it dies.

A fork can only be the run a fresh interpreter would be when what the libraries read while
they are imported is the same: the server takes a request only when its interpreter, its
working directory and its environment, but for the variables a launch sets per rank and run
(PER_RUN_VARIABLES), equal the server's own. Any other request, or a server that is gone,
gets a fresh process (``start``). Standard library only.

The protocol on the server's Unix socket, one connection per process: the rank sends a
JSON request (``argv``, ``env``, ``cwd``, ``executable``) preceded by its length (8 decimal
digits) with its output pipe's descriptor; the server answers ``P <pid>`` once forked (or
``R <why>``: refused), then ``E <exit status>`` (negative: ended by that signal) when the
process ends.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

SERVER_VARIABLE = "SCALEBENCH_PRELOADED_SERVER"  # the server's socket
FORKED_VARIABLE = "SCALEBENCH_FORKED"  # set in a process the server forked
# What a launch sets per rank and run, read by the run while it runs, never while the
# libraries are imported: a request may differ from the server in these only.
PER_RUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                     "MASTER_PORT", "BENCHOPT_RAISE_ON_ERROR", "PYTHONUNBUFFERED")
PER_RUN_PREFIXES = ("SCALEBENCH_", "SB_")
LENGTH_DIGITS = 8
READY_TIMEOUT_S = 120.0  # the server's imports, on a loaded machine


def per_run(name: str) -> bool:
    return name in PER_RUN_VARIABLES or name.startswith(PER_RUN_PREFIXES)


def import_time_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` the libraries may read while they are imported."""
    return {name: value for name, value in env.items() if not per_run(name)}


def refusal(request: dict, server_env: Mapping[str, str], server_cwd: str) -> str | None:
    """Why the server cannot fork ``request`` as a fresh interpreter would run it; None when
    it can."""
    if request["executable"] != sys.executable:
        return f"another interpreter ({request['executable']})"
    if request["cwd"] != server_cwd:
        return f"another working directory ({request['cwd']})"
    mine, theirs = import_time_environment(server_env), import_time_environment(request["env"])
    differing = sorted(name for name in mine.keys() | theirs.keys()
                       if mine.get(name) != theirs.get(name))
    return f"another environment ({', '.join(differing)})" if differing else None


def forked(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this process was forked by a preloaded server (its resident set then lacks
    the library pages it has not touched: scalebench.rank.names.HOST_PEAK_SINCE_RESET_FORKED)."""
    return env.get(FORKED_VARIABLE) == "1"


def encode_request(request: dict) -> bytes:
    body = json.dumps(request).encode()
    return f"{len(body):0{LENGTH_DIGITS}d}".encode() + body


class PreloadedProcess:
    """A benchopt process the server forked, as a rank sees it: what ``subprocess.Popen``
    offers it (``pid``, ``stdout``, ``poll``, ``wait``, ``send_signal``, ``terminate``)."""

    def __init__(self, connection: socket.socket, pid: int, stdout) -> None:
        self.connection = connection
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._pending = b""

    def _read_status(self, block: bool) -> None:
        self.connection.setblocking(block)
        try:
            while b"\n" not in self._pending:
                chunk = self.connection.recv(64)
                if not chunk:  # the server died: so did its process (it ends with it)
                    self._pending += b"E -9\n"
                    break
                self._pending += chunk
        except BlockingIOError:
            return
        finally:
            self.connection.setblocking(True)
        line = self._pending.split(b"\n", 1)[0].decode()
        self.returncode = int(line.removeprefix("E "))
        self.connection.close()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read_status(block=False)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._read_status(block=True)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _ask(path: str, command: list[str], env: Mapping[str, str]) -> PreloadedProcess | None:
    """The server's process for ``command`` (``[python, -m, module, ...]``), its output on a
    pipe; None when the server is gone or refuses."""
    request = {"argv": command[1:], "env": dict(env), "cwd": os.getcwd(),
               "executable": command[0]}
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    read_end, write_end = os.pipe()
    try:
        connection.connect(path)
        socket.send_fds(connection, [encode_request(request)], [write_end])
        answer = b""
        while b"\n" not in answer:
            chunk = connection.recv(256)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            answer += chunk
    except OSError:
        connection.close()
        os.close(read_end)
        return None
    finally:
        os.close(write_end)
    line, rest = answer.split(b"\n", 1)
    if not line.startswith(b"P "):
        connection.close()
        os.close(read_end)
        return None
    process = PreloadedProcess(connection, int(line[2:]), os.fdopen(read_end, "rb", 0))
    process._pending = rest
    return process


def start(command: list[str], env: Mapping[str, str], **popen: object):
    """``command``'s process with its output (stdout and stderr) on a pipe: forked by the
    server ``env`` names when it takes the request, else a fresh ``subprocess.Popen`` with
    the ``popen`` options."""
    path = env.get(SERVER_VARIABLE)
    if path and command[1:2] == ["-m"]:
        process = _ask(path, command, env)
        if process is not None:
            return process
    return subprocess.Popen(command, env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, **popen)


@contextmanager
def serving(env: Mapping[str, str] | None = None) -> Iterator[dict[str, str]]:
    """A server for the duration of the block, started with ``env`` (default: this
    process's environment); yields the variables that name it, for the environment of the
    launches it serves (empty when it could not start: they start fresh processes)."""
    env = dict(os.environ if env is None else env)
    folder = tempfile.mkdtemp(prefix="scalebench-preloaded-")
    path = str(Path(folder) / "server.sock")
    server = subprocess.Popen([sys.executable, "-m", "scalebench.benchopt_glue.server", path],
                              env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield {SERVER_VARIABLE: path} if _ready(server, path) else {}
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        for leftover in Path(folder).iterdir():
            leftover.unlink()
        os.rmdir(folder)


def _ready(server: subprocess.Popen, path: str) -> bool:
    """Whether the server listens on ``path`` (it creates it once its imports are done)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and server.poll() is None:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False
