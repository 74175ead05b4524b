"""A real local cluster for the SDK's tests: `trainyard up` (a server and
agents with simulated GPUs, TLS and tokens on) in a temporary directory on a
free port, stopped by its PID. The binary is $TRAINYARD_BIN."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time


def free_port_pair() -> int:
    """A port P such that P and P + 1 were free a moment ago (up's server
    takes P, its agent listener P + 1)."""
    for _ in range(100):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port: int = a.getsockname()[1]
            if port >= 65535:
                continue
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free pair of ports")


class UpCluster:
    """`trainyard up --nodes N` in a temporary directory.

    Attributes after start(): dir (the temporary directory), data_dir,
    config (the client config up wrote, with the admin's token and the CA).
    """

    def __init__(self, nodes: int = 2, gpus_per_node: int = 2):
        self.bin = os.environ.get("TRAINYARD_BIN", "")
        if not self.bin:
            raise RuntimeError("TRAINYARD_BIN is not set: the trainyard binary under test")
        self.nodes = nodes
        self.gpus = gpus_per_node
        self._tmp = tempfile.TemporaryDirectory(prefix="trainyard-sdk-")
        self.dir = self._tmp.name
        self.data_dir = os.path.join(self.dir, "cluster")
        self.config = os.path.join(self.data_dir, "client.yaml")
        self.log = os.path.join(self.dir, "up.log")
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> None:
        """Starts the cluster; returns once up says it is ready. Raises
        RuntimeError with up's output when it is not within `timeout`."""
        port = free_port_pair()
        with open(self.log, "wb") as log:
            self._proc = subprocess.Popen(
                [self.bin, "up", "--nodes", str(self.nodes), "--gpus-per-node", str(self.gpus),
                 "--port", str(port), "--data-dir", self.data_dir],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir,
                start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Press Ctrl-C" in self.output():
                return
            if self._proc.poll() is not None:
                break
            time.sleep(0.05)  # polls up's banner; the wait is bounded by `timeout`
        self.stop()
        raise RuntimeError(f"trainyard up did not come up:\n{self.output()}")

    def output(self) -> str:
        """What up printed so far."""
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        """SIGTERM to up (it stops its server and agents), SIGKILL after 30 s;
        then removes the directory."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        self._tmp.cleanup()
