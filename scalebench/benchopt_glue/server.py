"""The preloaded server (``scalebench.launch.preloaded`` says why and the protocol):
``python -m scalebench.benchopt_glue.server SOCKET`` imports what every run imports
(``scalebench.rank.startup``), listens on SOCKET, and forks a benchopt process for each
request it takes (none when the imports loaded the CUDA driver, which a forked process
could not use), in a session of its own, ended by SIGTERM when the server dies. It reports
each process's end to the rank that asked for it and sends SIGTERM to the process of a rank
whose connection closes first (the rank died). SIGTERM ends the server.
"""

from __future__ import annotations

import io
import json
import os
import selectors
import signal
import socket
import sys
from pathlib import Path

from scalebench.launch.liveness import start_heartbeat
from scalebench.launch.preloaded import FORKED_VARIABLE, LENGTH_DIGITS, refusal
from scalebench.launch.rank_entry import end_with_parent
from scalebench.rank.startup import import_and_freeze

POLL_S = 0.1  # how often ended processes are looked for between requests
REQUEST_TIMEOUT_S = 10.0  # a request is a few kilobytes sent at once
# The modules a request may run: the benchopt process of a rank, and only it.
SERVED_MODULES = ("scalebench.benchopt_glue",)


def receive_request(connection: socket.socket) -> tuple[dict, int]:
    """The request on ``connection`` and the output descriptor it carries."""
    data, descriptors, _, _ = socket.recv_fds(connection, 1 << 16, 1)
    while len(data) < LENGTH_DIGITS or len(data) < LENGTH_DIGITS + int(data[:LENGTH_DIGITS]):
        more = connection.recv(1 << 16)
        if not more:
            raise ConnectionError("the request ended early")
        data += more
    if len(descriptors) != 1:
        raise ConnectionError("the request carries no output descriptor")
    return json.loads(data[LENGTH_DIGITS:]), descriptors[0]


def cuda_driver_loaded() -> bool:
    """Whether this process has loaded the CUDA driver (an import that asked CUDA for its
    devices): a process forked after that cannot use the GPU, so the server then forks
    nothing and every rank starts fresh."""
    try:
        return "libcuda.so" in Path("/proc/self/maps").read_text()
    except OSError:
        return True  # unknown: as if it had


def become(request: dict, output: int, inherited: list[socket.socket],
           set_by_imports: dict[str, str]) -> None:
    """In the forked child: the process a fresh ``python ARGV`` would be, run to its end.
    ``inherited``: the server's sockets, closed here (a rank's connection held open by
    another rank's process would hide that rank's death from the server)."""
    os.setsid()
    end_with_parent()
    for held in inherited:
        held.close()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(stdin)
    os.close(output)
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update(set_by_imports)  # what a fresh process's own imports would set
    os.environ[FORKED_VARIABLE] = "1"
    os.chdir(request["cwd"])
    # A fresh interpreter's streams on the new descriptors, unbuffered as the rank asks.
    encoding = sys.stdout.encoding
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding=encoding, write_through=True,
        line_buffering=True)
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding=encoding, errors="backslashreplace",
        write_through=True, line_buffering=True)
    sys.argv = [request["argv"][1], *request["argv"][2:]]
    status = run_benchopt()
    end_as_the_interpreter_would(status)


def run_benchopt() -> int:
    """What ``python -m scalebench.benchopt_glue`` does once its libraries are imported; its
    exit status as the interpreter would make it (an uncaught SIGINT is re-raised at the
    end)."""
    from benchopt.cli import benchopt

    start_heartbeat()
    try:
        benchopt(args=sys.argv[1:], prog_name="benchopt")
    except SystemExit as ended:
        code = ended.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return -signal.SIGINT
    except BaseException:  # noqa: BLE001 - as the interpreter does: traceback, status 1
        import traceback

        traceback.print_exc()
        return 1
    return 0


def end_as_the_interpreter_would(status: int) -> None:
    """Non-daemon threads joined, exit handlers run, streams flushed; then the status, or
    the signal a negative one names."""
    import atexit
    import threading

    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter calls
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if status < 0:
            signal.signal(-status, signal.SIG_DFL)
            os.kill(os.getpid(), -status)
        os._exit(status if status >= 0 else 1)


class Server:
    """The listening socket, the connections of running processes, and their pids."""

    def __init__(self, path: str, env: dict[str, str]) -> None:
        """``env``: the environment before the imports (requests are compared with it)."""
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path + ".binding")
        self.listener.listen(64)
        os.rename(path + ".binding", path)  # connectable from the moment it is there
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.running: dict[int, socket.socket] = {}  # pid -> the rank's connection
        self.env, self.cwd = env, os.getcwd()
        # Variables torch sets while it is imported (KMP_INIT_AT_FORK, ...).
        self.set_by_imports = {name: value for name, value in os.environ.items()
                               if env.get(name) != value}
        self.cuda_touched = cuda_driver_loaded()

    def serve(self) -> None:
        while True:
            for key, _ in self.selector.select(POLL_S):
                if key.fileobj is self.listener:
                    self.accept()
                else:
                    self.rank_gone(key.fileobj)
            self.reap()

    def accept(self) -> None:
        connection, _ = self.listener.accept()
        connection.settimeout(REQUEST_TIMEOUT_S)  # a silent client holds no one else up
        try:
            request, output = receive_request(connection)
        except (OSError, ValueError):
            connection.close()
            return
        connection.settimeout(None)
        why = refusal(request, self.env, self.cwd)
        if why is None and self.cuda_touched:
            why = "the CUDA driver was loaded while the server imported (a fork could not use it)"
        if why is None and request["argv"][:2] != ["-m", SERVED_MODULES[0]]:
            why = f"a module it does not serve ({' '.join(request['argv'][:2])})"
        if why is not None:
            os.close(output)
            connection.sendall(f"R {why}\n".encode())
            connection.close()
            return
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            self.selector.close()
            try:
                become(request, output, [self.listener, *self.running.values(), connection],
                       self.set_by_imports)
            finally:
                os._exit(1)
        os.close(output)
        self.running[pid] = connection
        self.selector.register(connection, selectors.EVENT_READ, pid)
        connection.sendall(f"P {pid}\n".encode())

    def rank_gone(self, connection: socket.socket) -> None:
        """A rank's connection is readable: it closed (the rank died) before its process
        ended; the process gets SIGTERM, as a rank's child does when the rank dies."""
        pid = self.selector.get_key(connection).data
        if connection.recv(1):
            return  # a rank sends nothing more: ignore it
        self.selector.unregister(connection)
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def reap(self) -> None:
        while self.running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.running.pop(pid, None)
            if connection is None:
                continue
            if connection.fileno() >= 0 and self._registered(connection):
                self.selector.unregister(connection)
            try:
                connection.sendall(f"E {os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            connection.close()

    def _registered(self, connection: socket.socket) -> bool:
        try:
            self.selector.get_key(connection)
        except KeyError:
            return False
        return True


def main(argv: list[str]) -> int:
    (path,) = argv
    end_with_parent()  # no server outlives the process that started it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    env = dict(os.environ)
    import_and_freeze()
    server = Server(path, env)
    try:
        server.serve()
    finally:
        server.listener.close()
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
