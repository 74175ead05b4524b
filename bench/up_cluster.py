"""A `trainyard up` cluster for the benches: started in a fresh directory on free ports, the CLI
pointed at it (its own client config, none of the caller's credentials), stopped and removed at
the end. Used as `with UpCluster(binary, nodes=2, prefix="...") as c: c.cli("submit", spec)`."""
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port(pair=False):
    """A free port; with `pair`, one whose next port is free too (up's server takes both: clients
    and agents)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not pair:
            return port
        try:
            with socket.socket() as t:
                t.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue


def free_port_pair():
    return free_port(pair=True)


def wait(what, check, timeout=60):
    """Polls `check` every 20 ms until it is true (returns time.monotonic() then); exits naming
    `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {what}")


class UpCluster:
    def __init__(self, trainyard, nodes, prefix, config=None):
        """`config`: the server's config file's text (docs/control-plane.md), written to the
        cluster's directory and given to up as --config."""
        self.trainyard = os.path.abspath(trainyard)  # up runs in its own directory
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self._specs = itertools.count()
        extra = []
        if config is not None:
            with open(self.dir + "/server.yaml", "w") as f:
                f.write(config)
            extra = ["--config", self.dir + "/server.yaml"]
        self.up = subprocess.Popen([self.trainyard, "up", "--nodes", str(nodes), "--port", str(free_port_pair()),
                                    "--http-port", "0", "--data-dir", self.dir + "/.trainyard", *extra], cwd=self.dir,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.env = dict(os.environ, TRAINYARD_CONFIG=self.dir + "/.trainyard/client.yaml")
        for k in ("TRAINYARD_TOKEN", "TRAINYARD_SERVER", "TRAINYARD_CA_FILE"):
            self.env.pop(k, None)

    def __enter__(self):
        try:
            for line in self.up.stdout:
                if line.startswith("Trainyard is up"):
                    return self
            raise SystemExit("up never printed its banner")
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.up.send_signal(signal.SIGINT)
        try:
            self.up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.up.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *argv):
        """`trainyard ARGV`'s standard output; exits with its error when it fails."""
        r = subprocess.run([self.trainyard, *argv], env=self.env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise SystemExit(f"trainyard {' '.join(argv)}: {r.stderr}")
        return r.stdout

    def submit(self, spec):
        """Submits the job spec `spec` (YAML text), written to a file of the cluster's directory;
        returns the job's name."""
        path = os.path.join(self.dir, f"spec-{next(self._specs)}.yaml")
        with open(path, "w") as f:
            f.write(spec)
        return self.cli("submit", path).split()[1]  # "job NAME submitted"

    def describe(self, job):
        """`describe JOB -o json`, parsed."""
        return json.loads(self.cli("describe", job, "-o", "json"))

    def task(self, job, role="worker"):
        """The first task of `role` in `job`'s description ({} when there is none)."""
        for t in self.describe(job)["tasks"]:
            if t.get("role") == role:
                return t
        return {}
