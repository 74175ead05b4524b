"""The SDK against a real cluster (`trainyard up`: a server and two agents,
TLS and tokens on), configured as the CLI is: TRAINYARD_CONFIG names the
client config up wrote. Jobs are submitted, waited for, read and killed
through trainyard.Client; workers register and meet at barriers through
trainyard.Worker."""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))

import trainyard  # noqa: E402
from up_cluster import UpCluster  # noqa: E402

TASKS = pathlib.Path(__file__).resolve().parent / "tasks"
PYTHONPATH = os.environ.get("PYTHONPATH", "")


def has_torch() -> bool:
    return subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"], capture_output=True).returncode == 0


def python_job(name: str, script: str, *args: str, count: int = 1, **role: object) -> dict[str, object]:
    """A spec whose `count` workers run tasks/SCRIPT ARGS with the SDK importable."""
    command = ["/usr/bin/python3", str(TASKS / script), *args]
    return {"name": name, "replicas": {"worker": {"count": count, "command": command,
                                                  "env": {"PYTHONPATH": PYTHONPATH}, **role}}}


class ClusterTest(unittest.TestCase):
    cluster: UpCluster
    client: trainyard.Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = UpCluster(nodes=2, gpus_per_node=2)
        cls.cluster.start()
        # The SDK finds the server, the admin's token and the CA as the CLI does.
        for name in ("TRAINYARD_SERVER", "TRAINYARD_TOKEN", "TRAINYARD_CA_FILE"):
            os.environ.pop(name, None)
        os.environ["TRAINYARD_CONFIG"] = cls.cluster.config
        cls.client = trainyard.Client()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        cls.cluster.stop()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.cluster.bin, *args], capture_output=True, text=True, timeout=60)

    def run_to_success(self, spec: dict[str, object], timeout: float) -> tuple[trainyard.Job, str]:
        """Submits `spec`, waits for it to succeed; the job's end and its workers' output."""
        job = self.client.submit(spec)
        final = self.client.wait(job, timeout=timeout)
        logs = self.client.log_text(job, "worker", follow=True)
        self.assertEqual(final.state, "SUCCEEDED", f"{final.reason}\n{logs}{self.client.log_text(job, stderr=True)}")
        return final, logs

    def wait_for_line(self, job: str, role: str, text: str) -> None:
        """Follows the role's logs until a line holds `text` (the job's own
        signal that it got there); fails when the logs end first."""
        for line in self.client.logs(job, role, follow=True):
            if text in line.text:
                return
        self.fail(f"{job}: the logs of {role} ended without {text!r}")

    def test_submit_wait_and_logs(self) -> None:
        job = self.client.submit({
            "name": "sdk-hello",
            "replicas": {"worker": {"count": 2, "command": [
                "sh", "-c", 'echo "hello from $TRAINYARD_INDEX"; echo "to stderr" >&2']}}})
        self.assertTrue(job.startswith("sdk-hello"))
        states = [view.state for view in self.client.watch(job, timeout=120)]
        self.assertEqual(states[-1], "SUCCEEDED", states)
        final = self.client.wait(job, timeout=60)
        self.assertEqual(final.state, "SUCCEEDED")
        workers = sorted((t.name, t.state, t.exit_code) for t in final.tasks if t.role == "worker")
        self.assertEqual(workers, [(f"{job}-worker-0", "SUCCEEDED", 0), (f"{job}-worker-1", "SUCCEEDED", 0)])
        self.assertEqual(sorted(self.client.log_text(job, "worker").splitlines()),
                         ["hello from 0", "hello from 1"])
        self.assertEqual(self.client.log_text(job, "worker", 1, stderr=True), "to stderr\n")
        lines = list(self.client.logs(job, "worker", 0))
        self.assertEqual({(l.task, l.stderr, l.text) for l in lines},
                         {(f"{job}-worker-0", False, "hello from 0"), (f"{job}-worker-0", True, "to stderr")})
        self.assertTrue(all(l.unix_nanos > 0 for l in lines))
        described = self.client.describe(job)
        self.assertEqual(described.state, "SUCCEEDED")
        self.assertIn("submitted", [kind for _, kind, _ in described.events])
        self.assertIn(job, [j.name for j in self.client.list(include_finished=True)])
        self.assertIn(job, [j.name for j in self.client.list(states=["SUCCEEDED"])])
        # The CLI, given the same config, sees the same job.
        cli = self.cli("describe", job, "-o", "json")
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertEqual(json.loads(cli.stdout)["name"], job)

    def test_yaml_file_job_killed(self) -> None:
        spec = pathlib.Path(self.cluster.dir, "sleeper.yaml")
        spec.write_text("name: sdk-sleeper\nreplicas:\n  worker:\n"
                        "    command: [sh, -c, 'echo started; exec sleep 600']\n")
        job = self.client.submit(spec)
        states = []
        for view in self.client.watch(job, timeout=120):
            states.append(view.state)
            if view.state == "RUNNING":
                break
        self.assertEqual(states[-1], "RUNNING", states)
        self.wait_for_line(job, "worker", "started")
        # What it uses, once its agent sampled it (every 10 s on `up`).
        deadline = time.monotonic() + 60
        while True:
            tasks, totals = self.client.resources(job)
            if any(t.task == f"{job}-worker-0" and t.latest is not None for t in tasks):
                break
            self.assertLess(time.monotonic(), deadline, tasks)
            time.sleep(0.2)
        worker = next(t for t in tasks if t.task == f"{job}-worker-0")
        latest = worker.latest
        assert latest is not None
        self.assertGreater(latest.memory_bytes, 0)
        self.assertLess(latest.cpu_cores, 0.5, "it sleeps")
        self.assertFalse(worker.near_memory_limit)
        self.assertEqual(worker.state, "RUNNING")
        self.assertTrue(totals)
        self.assertGreaterEqual(totals[-1].memory_bytes, latest.memory_bytes)
        # A command in the running task, as it runs; its input and exit code.
        ran = self.client.exec(job, "worker", ["sh", "-c", "echo $TRAINYARD_ROLE; wc -c; echo oops >&2; exit 4"],
                               stdin=b"12345")
        self.assertEqual((ran.stdout, ran.stderr, ran.exit_code, ran.returncode), (b"worker\n5\n", b"oops\n", 4, 4))
        self.assertEqual(ran.attempt, worker.attempt)
        self.assertTrue(ran.node)
        with self.assertRaises(trainyard.NotFoundError):
            self.client.exec(job, "ps", ["true"])
        self.assertEqual(self.client.kill(job, "no longer needed"), "KILLED")
        final = self.client.wait(job, timeout=60)
        self.assertEqual(final.state, "KILLED")
        self.assertNotIn(job, [j.name for j in self.client.list()])
        # Accounting keeps it: KILLED, with its user's usage.
        deadline = time.monotonic() + 60
        while True:
            kept = self.client.history(time.time() - 3600, name=job)
            if kept and kept[0].settled:
                break
            self.assertLess(time.monotonic(), deadline, kept)
            time.sleep(0.1)
        self.assertEqual([(a.name, a.state) for a in kept], [(job, "KILLED")])
        self.assertGreater(kept[0].cpu_hours, 0.0)
        self.assertEqual(self.client.history(name=job, states=["SUCCEEDED"]), [])
        rows, total = self.client.usage(time.time() - 3600, by="user")
        self.assertIn(kept[0].user, [r.key for r in rows])
        self.assertGreaterEqual(total.killed, 1)

    def test_a_service_is_reached_through_the_servers_proxy(self) -> None:
        import ssl
        import urllib.request
        serve = ('cd "$TRAINYARD_TASK_DIR" && echo served > index.html && '
                 'exec /usr/bin/python3 -m http.server --bind "$TRAINYARD_NODE_ADDRESS" "$TRAINYARD_SERVICE_PORT"')
        job = self.client.submit({"name": "sdk-web", "replicas": {
            "worker": {"command": ["sleep", "600"]},
            "web": {"kind": "service", "command": ["sh", "-c", serve]}}})
        for view in self.client.watch(job, timeout=120):
            if view.state == "RUNNING":
                break
        deadline = time.monotonic() + 60
        while True:  # the job may run before its service task does
            try:
                url = self.client.service_url(job)
                break
            except trainyard.TrainyardError as e:
                self.assertLess(time.monotonic(), deadline, str(e))
                time.sleep(0.2)
        self.assertIn("/proxy/", url)
        context = ssl.create_default_context(cafile=self.client.config.ca_file) if url.startswith("https") else None
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, context=context, timeout=30) as answer:
                    body = answer.read().decode()
                    csp = answer.headers.get("Content-Security-Policy", "")
                break
            except OSError as e:  # not listening yet: the proxy answers 502
                self.assertLess(time.monotonic(), deadline, str(e))
                time.sleep(0.2)
        self.assertEqual(body, "served\n")
        self.assertTrue(csp.startswith("sandbox"), csp)
        with self.assertRaises(trainyard.NotFoundError):
            self.client.service_url(job, "worker")
        self.assertEqual(self.client.kill(job), "KILLED")

    def test_bad_input_names_the_field(self) -> None:
        with self.assertRaises(trainyard.SpecError) as bad:
            self.client.submit({"name": "sdk-bad", "replicas": {"worker": {"count": -1, "command": ["true"]}}})
        self.assertTrue(any(p.startswith("replicas.worker.count:") for p in bad.exception.problems),
                        bad.exception.problems)
        with self.assertRaises(trainyard.SpecError) as not_list:
            self.client.submit("name: sdk-bad\nreplicas:\n  worker: {command: true}\n")
        self.assertIn("replicas.worker.command", str(not_list.exception))
        with self.assertRaises(trainyard.NotFoundError):
            self.client.describe("sdk-no-such-job")
        with self.assertRaises(trainyard.NotFoundError):
            self.client.kill("sdk-no-such-job")
        with self.assertRaises(trainyard.NotFoundError):
            self.client.resources("sdk-no-such-job")
        with self.assertRaises(trainyard.InvalidArgument) as state:
            self.client.list(states=["DONE"])
        self.assertIn("states[0]", str(state.exception))
        with self.assertRaises(trainyard.InvalidArgument) as running:
            self.client.history(states=["RUNNING"])
        self.assertIn("states[0]", str(running.exception))
        with self.assertRaises(trainyard.InvalidArgument) as backwards:
            self.client.usage(since=2000, until=1000)
        self.assertIn("until_unix_ms", str(backwards.exception))

    def test_workers_register_and_meet_at_barriers(self) -> None:
        final, logs = self.run_to_success(
            python_job("sdk-workers", "barrier_worker.py", count=3, resources={"ports": 1}), timeout=120)
        job = final.name
        # The master saw every worker complete (the server may end the job
        # by the tasks' exits first, so its reason may be its own).
        self.assertIn(f"job {job} SUCCEEDED: all 3 workers COMPLETED",
                      self.client.log_text(job, "jobmaster", follow=True))
        lines = logs.splitlines()
        self.assertEqual(sorted(l for l in lines if l.startswith("registered")),
                         [f"registered id={i} of=3" for i in range(3)])
        self.assertEqual(sorted(l for l in lines if l.startswith("barrier")),
                         ["barrier generation=0"] * 3 + ["barrier generation=1"] * 3)
        self.assertEqual([l for l in lines if l.startswith("workers")],
                         ["workers 0:worker/0,1:worker/1,2:worker/2"] * 3)
        torch = sorted(l for l in lines if l.startswith("torch"))
        self.assertEqual([l.split()[1:3] for l in torch], [[f"rank={i}", "world=3"] for i in range(3)])
        self.assertEqual(len({" ".join(l.split()[3:]) for l in torch}), 1, torch)  # one rendezvous point
        zero = next(t for t in final.tasks if t.role == "worker" and t.worker_id == 0)
        self.assertIn(f"addr={zero.proto.node_address} ", torch[0])

    @unittest.skipUnless(has_torch(), "no torch.distributed for /usr/bin/python3 (Debian: python3-torch)")
    def test_pytorch_ranks_meet_through_the_job_master(self) -> None:
        _, logs = self.run_to_success(
            python_job("sdk-torch", "torch_worker.py", count=3, resources={"ports": 1}), timeout=240)
        self.assertEqual(sorted(logs.splitlines()), [f"rank={r} world=3 sum=6" for r in range(3)])

    def test_worker_exception_fails_the_job(self) -> None:
        job = self.client.submit(python_job("sdk-failing", "barrier_worker.py", "--fail", count=2,
                                            restartPolicy="Never"))
        final = self.client.wait(job, timeout=120)
        self.assertEqual(final.state, "FAILED")
        # Worker 1's exception reached the master as its ERROR reason, which
        # failed the barrier worker 0 waited in.
        self.assertRegex(self.client.log_text(job, "worker", 0, follow=True),
                         r"barrier failed: .*worker 1 .*RuntimeError: worker 1 gives up.*\(ABORTED\)")

    def test_kill_runs_the_checkpoint_callback(self) -> None:
        job = self.client.submit(python_job("sdk-checkpoint", "checkpoint_worker.py"))
        self.wait_for_line(job, "worker", "ready")
        self.assertEqual(self.client.kill(job), "KILLED")
        self.assertEqual(self.client.wait(job, timeout=60).state, "KILLED")
        # The job is KILLED at once; its task saves its checkpoint within the
        # kill's grace, which the followed log shows before it ends.
        self.wait_for_line(job, "worker", "checkpoint reason=SIGTERM step=42")

    def test_a_preempted_job_checkpoints_when_ordered_and_resumes_at_the_saved_step(self) -> None:
        spec = python_job("sdk-coordinated", "coordinated_worker.py", count=2, resources={"gpus": 2})
        spec["priority"] = "ptr"
        low = self.client.submit(spec)
        self.wait_for_line(low, "worker", "start at 0")
        urgent = self.client.submit({"name": "sdk-urgent", "priority": "production", "replicas": {"worker": {
            "resources": {"gpus": 2}, "command": ["sh", "-c", "sleep 1"]}}})
        self.assertEqual(self.client.wait(urgent, timeout=120).state, "SUCCEEDED")
        final = self.client.wait(low, timeout=180)
        logs = self.client.log_text(low, "worker", follow=True)
        self.assertEqual(final.state, "SUCCEEDED", f"{final.reason}\n{logs}")
        # The master pushed the order to both workers; both saved, and the
        # job resumed at the lower of their steps.
        saved = [text for _, kind, text in final.events if kind == "checkpointed"]
        self.assertEqual(len(saved), 1, final.events)
        match = re.match(r"2 workers saved step (\d+);", saved[0])
        self.assertIsNotNone(match, saved)
        step = int(match.group(1)) if match else -1
        self.assertGreater(step, 0)
        self.assertEqual(logs.count(f"start at {step}"), 2, logs)
        self.assertNotIn("did not report a checkpoint by the deadline", str(final.events))

    @unittest.skipUnless(has_torch(), "no torch.distributed for /usr/bin/python3 (Debian: python3-torch)")
    def test_a_preempted_pytorch_ddp_job_saves_when_ordered_and_resumes_at_the_saved_step(self) -> None:
        # examples/pytorch_ddp/train.py as 4 ranks of a pytorch job given a
        # master (`jobmaster: true`), one GPU each: the cluster's 4 GPUs.
        train = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch_ddp" / "train.py"
        command = ["/usr/bin/python3", str(train), "--epochs", "20", "--step-sleep-ms", "100"]
        role = {"resources": {"cpu": "250m", "memory": "512Mi", "gpus": 1}, "command": command,
                "env": {"PYTHONPATH": PYTHONPATH}}
        low = self.client.submit({"name": "sdk-ddp", "framework": "pytorch", "jobmaster": True, "priority": "ptr",
                                  "replicas": {"master": {"count": 1, **role}, "worker": {"count": 3, **role}}})
        self.wait_for_line(low, "master", "epoch 1 loss")
        urgent = self.client.submit({"name": "sdk-ddp-urgent", "priority": "production", "replicas": {"worker": {
            "resources": {"gpus": 1}, "command": ["sh", "-c", "sleep 1"]}}})
        self.assertEqual(self.client.wait(urgent, timeout=180).state, "SUCCEEDED")
        final = self.client.wait(low, timeout=300)
        logs = self.client.log_text(low, follow=True)
        self.assertEqual(final.state, "SUCCEEDED", f"{final.reason}\n{logs}{self.client.log_text(low, stderr=True)}")
        # The master pushed the order; rank 0 broadcast it, so all 4 ranks
        # stopped at one step, which rank 0 saved and all reported.
        saved = [text for _, kind, text in final.events if kind == "checkpointed"]
        self.assertEqual(len(saved), 1, final.events)
        match = re.match(r"4 workers saved step (\d+);", saved[0])
        self.assertIsNotNone(match, saved)
        step = int(match.group(1)) if match else -1
        self.assertGreaterEqual(step, 8, "saved after the first epoch's 8 steps")
        first = self.client.log_text(low, attempt=0)
        self.assertEqual(first.count(f"saved step {step} as ordered"), 4, first)
        # No rank trained past the saved step: the last epoch the first
        # attempt finished is at most the one the step is in.
        finished = [int(m) for m in re.findall(r"^epoch (\d+) loss", first, re.M)]
        self.assertLessEqual(max(finished), step // 8, first)
        # Every rank resumed at that step, and the job trained to its end.
        resumed = rf"resumed from (epoch \d+ at step {step}$|step {step} \()"
        self.assertEqual(len(re.findall(resumed, logs, re.M)), 4, logs)
        self.assertEqual(logs.count("epoch 20 loss"), 4, logs)
        self.assertNotIn("did not report a checkpoint by the deadline", str(final.events))


if __name__ == "__main__":
    unittest.main()
