"""The SDK's parts that need no cluster: the client config found as the CLI
finds it, specs refused with the field named, the task environment read
with the variable named, log lines, and a Worker against a scripted job
master on a loopback port (the wire: 4-byte big-endian length + protobuf)."""
from __future__ import annotations

import os
import pathlib
import socket
import struct
import tempfile
import threading
import time
import unittest
from typing import Callable, Optional, Union

import trainyard
from trainyard._pb import jobmaster_pb2, trainyard_pb2
from trainyard.config import resolve_config
from trainyard.logs import LineAssembler, split_stamp
from trainyard.spec import spec_to_yaml


class ConfigTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def write(self, name: str, text: str, mode: int = 0o600) -> str:
        path = os.path.join(self.dir, name)
        pathlib.Path(path).write_text(text)
        os.chmod(path, mode)
        return path

    def test_config_file_then_environment_then_arguments(self) -> None:
        path = self.write("client.yaml", "server: 10.0.0.1:7450\ntoken: ty_file\ncaFile: certs/ca.crt\n")
        env = {"TRAINYARD_CONFIG": path}
        c = resolve_config(env=env)
        self.assertEqual((c.server, c.token, c.ca_file, c.path),
                         ("10.0.0.1:7450", "ty_file", os.path.join(self.dir, "certs/ca.crt"), path))
        env.update(TRAINYARD_SERVER="10.0.0.2:1", TRAINYARD_TOKEN="ty_env", TRAINYARD_CA_FILE="/ca.pem")
        c = resolve_config(env=env)
        self.assertEqual((c.server, c.token, c.ca_file), ("10.0.0.2:1", "ty_env", "/ca.pem"))
        c = resolve_config(server="h:2", token="", ca_file="", env=env)
        self.assertEqual((c.server, c.token, c.ca_file), ("h:2", "", ""))

    def test_defaults_without_a_config(self) -> None:
        cwd = os.getcwd()
        os.chdir(self.dir)
        try:
            c = resolve_config(env={"HOME": self.dir})
        finally:
            os.chdir(cwd)
        self.assertEqual((c.server, c.token, c.ca_file, c.path), ("127.0.0.1:7450", "", "", ""))

    def test_bad_configs_name_the_problem(self) -> None:
        with self.assertRaisesRegex(trainyard.ConfigError, "TRAINYARD_CONFIG names /nonexistent"):
            resolve_config(env={"TRAINYARD_CONFIG": "/nonexistent/client.yaml"})
        path = self.write("typo.yaml", "server: h:1\ntokn: x\n")
        with self.assertRaisesRegex(trainyard.ConfigError, 'unknown key "tokn"'):
            resolve_config(env={"TRAINYARD_CONFIG": path})
        os.makedirs(os.path.join(self.dir, "home/.config/trainyard"))
        self.write("home/.config/trainyard/client.yaml", "server: h:1\n", mode=0o666)
        with self.assertRaisesRegex(trainyard.ConfigError, "others may change it"):
            resolve_config(env={"HOME": os.path.join(self.dir, "home")})

    def test_client_arguments_are_named(self) -> None:
        with trainyard.Client(server="127.0.0.1:1", token="", ca_file="") as c:
            with self.assertRaisesRegex(trainyard.InvalidArgument, "index: needs a role"):
                next(c.logs("job", index=0))
            with self.assertRaisesRegex(trainyard.InvalidArgument, "tail_lines: must be >= 0"):
                next(c.logs("job", tail_lines=-1))
            with self.assertRaisesRegex(trainyard.InvalidArgument, "job: expected a job name"):
                c.describe("")
        with self.assertRaisesRegex(trainyard.ConfigError, "timeout: must be positive"):
            trainyard.Client(server="127.0.0.1:1", timeout=0)

    def test_a_list_of_servers_is_one_target_that_reaches_the_one_that_listens(self) -> None:
        from concurrent import futures

        import grpc
        from trainyard.client import is_local_address, server_target
        self.assertEqual(server_target("10.0.0.1:7450"), ("10.0.0.1:7450", []))
        # No token in clear to the second server because the first is local.
        self.assertTrue(is_local_address("127.0.0.1:7450,127.0.0.1:7460"))
        self.assertFalse(is_local_address("127.0.0.1:7450,10.0.0.2:7450"))
        target, options = server_target("[fd00::1]:7450,[fd00::2]:7450")
        self.assertEqual(target, "ipv6:[fd00::1]:7450,[fd00::2]:7450")
        self.assertIn(("grpc.lb_policy_name", "round_robin"), options)
        for bad in ("10.0.0.1:7450,server-b:7450", "10.0.0.1:7450,[::1]:7450", "10.0.0.1:7450,10.0.0.2"):
            with self.assertRaisesRegex(trainyard.ConfigError, "server: "):
                server_target(bad)
        # Only the second listens (a leader beside a standby): a call gets
        # there. The server serves nothing, so the answer is UNIMPLEMENTED.
        listening = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        port = listening.add_insecure_port("127.0.0.1:0")
        listening.start()
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))  # bound, not listening: refused
        try:
            with trainyard.Client(server=f"127.0.0.1:{silent.getsockname()[1]},127.0.0.1:{port}", token="",
                                  ca_file="") as c:
                with self.assertRaises(trainyard.ServerError) as raised:
                    c.describe("job")
                self.assertEqual(raised.exception.code, "UNIMPLEMENTED")
        finally:
            silent.close()
            listening.stop(0)

    def test_client_refuses_an_unreadable_ca(self) -> None:
        with self.assertRaisesRegex(trainyard.ConfigError, "caFile: .*missing.pem"):
            trainyard.Client(server="127.0.0.1:1", token="t", ca_file=os.path.join(self.dir, "missing.pem"))


class SpecTest(unittest.TestCase):
    def test_forms_of_a_spec(self) -> None:
        spec = {"name": "a", "replicas": {"worker": {"command": ["true"]}}}
        self.assertIn("name: a", spec_to_yaml(spec))
        self.assertEqual(spec_to_yaml("name: b\n"), "name: b\n")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("name: c\n")
            f.flush()
            self.assertEqual(spec_to_yaml(pathlib.Path(f.name)), "name: c\n")

    def test_bad_specs_name_the_field(self) -> None:
        cases = [
            (["a", "list"], "spec: expected a mapping"),
            ("- a\n- list\n", "spec: expected a mapping"),
            ("name: [unclosed\n", "spec: not valid YAML"),
            ({"replicas": {"worker": {1: "x"}}}, "replicas.worker: key 1 is a int"),
            ({"replicas": {"worker": {"env": {"A": object()}}}}, "spec: a value cannot be written"),
        ]
        for spec, message in cases:
            with self.subTest(spec=spec):
                with self.assertRaises(trainyard.SpecError) as e:
                    spec_to_yaml(spec)  # type: ignore[arg-type]
                self.assertIn(message, str(e.exception))
                self.assertIsInstance(e.exception, ValueError)


class WorkerEnvTest(unittest.TestCase):
    BASE = {"TRAINYARD_JOB_MASTER": "127.0.0.1:9000", "TRAINYARD_JOB": "j", "TRAINYARD_ROLE": "worker",
            "TRAINYARD_INDEX": "2", "TRAINYARD_WORKER_ID": "2", "TRAINYARD_PORTS": "9001,9002",
            "TRAINYARD_RESTART_COUNT": "1", "TRAINYARD_JOB_SECRET": "s", "TRAINYARD_NODE_ADDRESS": "10.0.0.3"}

    def test_reads_the_task_environment(self) -> None:
        env = trainyard.WorkerEnv.from_env(self.BASE)
        self.assertEqual((env.master, env.role, env.index, env.worker_id, env.ports, env.restart_count,
                          env.job_secret, env.node_address),
                         ("127.0.0.1:9000", "worker", 2, 2, (9001, 9002), 1, "s", "10.0.0.3"))

    def test_bad_variables_are_named(self) -> None:
        cases = [({"TRAINYARD_JOB_MASTER": ""}, "TRAINYARD_JOB_MASTER is not set"),
                 ({"TRAINYARD_JOB_MASTER": "nohost"}, "TRAINYARD_JOB_MASTER='nohost' is not host:port"),
                 ({"TRAINYARD_INDEX": "two"}, "TRAINYARD_INDEX='two' is not an integer"),
                 ({"TRAINYARD_PORTS": "80,x"}, "TRAINYARD_PORTS='80,x'"),
                 ({"TRAINYARD_PORTS": "70000"}, "TRAINYARD_PORTS='70000'")]
        for change, message in cases:
            with self.subTest(change=change):
                with self.assertRaisesRegex(trainyard.TaskEnvironmentError, message):
                    trainyard.WorkerEnv.from_env({**self.BASE, **change})


class LogsTest(unittest.TestCase):
    def test_stamps_and_lines(self) -> None:
        self.assertEqual(split_stamp("1796397103552526519 hello"), (1796397103552526519, "hello"))
        self.assertEqual(split_stamp("no stamp here"), (0, "no stamp here"))
        self.assertEqual(split_stamp("9999999999999999999 over int64"), (0, "9999999999999999999 over int64"))
        a = LineAssembler()
        self.assertEqual(list(a.add(b"one\ntw")), ["one"])
        self.assertEqual(list(a.add(b"o\nthr")), ["two"])
        self.assertEqual(a.finish(), "thr")
        self.assertIsNone(a.finish())


# What a scripted master sends for a request: nothing, an answer, or a list
# of frames (its `checkpoint` ones unsolicited, the other the answer).
Answer = Union[Optional[jobmaster_pb2.JobMasterResponse], list[jobmaster_pb2.JobMasterResponse]]


class ScriptedMaster:
    """A job master on a loopback port that answers each connection's frames,
    one connection after another, with the responses `answer` makes (None: no
    answer). With drop_first_barrier it closes the first connection on its
    first barrier instead of answering, as a master that crashed."""

    def __init__(self, answer: Callable[[jobmaster_pb2.JobMasterRequest], "Answer"],
                 drop_first_barrier: bool = False):
        self.answer = answer
        self.drop_first_barrier = drop_first_barrier
        self.requests: list[jobmaster_pb2.JobMasterRequest] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            self.serve_connection(conn)

    def serve_connection(self, conn: socket.socket) -> None:
        with conn:
            buffer = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
                while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack(">I", buffer[:4])[0]:
                    size = struct.unpack(">I", buffer[:4])[0]
                    request = jobmaster_pb2.JobMasterRequest.FromString(buffer[4:4 + size])
                    buffer = buffer[4 + size:]
                    self.requests.append(request)
                    if self.drop_first_barrier and request.WhichOneof("body") == "barrier":
                        self.drop_first_barrier = False
                        return
                    response = self.answer(request)
                    # A list: frames in order, its `checkpoint` ones unsolicited
                    # (request id 0), the other the answer.
                    if response is None:
                        continue
                    responses = response if isinstance(response, list) else [response]
                    for r in responses:
                        pushed = isinstance(response, list) and r.WhichOneof("body") == "checkpoint"
                        r.request_id = 0 if pushed else request.request_id
                        payload = r.SerializeToString()
                        conn.sendall(struct.pack(">I", len(payload)) + payload)

    def close(self) -> None:
        self.listener.close()


def answer(request: jobmaster_pb2.JobMasterRequest) -> "jobmaster_pb2.JobMasterResponse | None":
    kind = request.WhichOneof("body")
    if kind == "starting":
        return jobmaster_pb2.JobMasterResponse(registered=jobmaster_pb2.RegisterReply(
            worker_id=4, num_workers=8, barrier_generation=3))
    if kind == "barrier":
        if request.barrier.timeout_ms == 1000:
            return jobmaster_pb2.JobMasterResponse(error=jobmaster_pb2.ErrorReply(
                code=4, message="barrier timed out with 7 of 8 workers arrived; missing: 1"))
        return jobmaster_pb2.JobMasterResponse(barrier=jobmaster_pb2.BarrierReply(
            generation=request.barrier.generation))
    if kind == "state_change":
        return jobmaster_pb2.JobMasterResponse(state=jobmaster_pb2.StateReply(worker_id=4))
    return None


class WorkerWireTest(unittest.TestCase):
    def test_registers_meets_barriers_and_completes(self) -> None:
        master = ScriptedMaster(answer)
        env = trainyard.WorkerEnv.from_env({**WorkerEnvTest.BASE, "TRAINYARD_JOB_MASTER": master.address})
        steps: list[str] = []
        with trainyard.Worker(env) as w:
            self.assertEqual((w.worker_id, w.num_workers), (4, 8))
            self.assertEqual(w.barrier(timeout=30), 3)
            self.assertEqual(w.barrier(), 4)
            with self.assertRaises(trainyard.JobMasterError) as late:
                w.barrier(timeout=1)
            self.assertEqual(late.exception.code, "DEADLINE_EXCEEDED")
            self.assertIn("missing: 1", str(late.exception))
            def save(request: trainyard.CheckpointRequest) -> int:
                steps.append(request.reason)
                return 7

            w.on_checkpoint(save)
            self.assertEqual(w.request_checkpoint("preemption"), 7)
        master.close()
        starting = master.requests[0].starting
        self.assertEqual((starting.info.worker_id, starting.info.role, starting.info.index,
                          starting.info.task_name, starting.info.ip, list(starting.info.ports),
                          starting.restart_count, starting.job_secret, starting.pings),
                         (2, "worker", 2, "j-worker-2", "10.0.0.3", [9001, 9002], 1, "s", True))
        self.assertEqual(master.requests[-1].state_change.state, trainyard_pb2.COMPLETED)
        self.assertEqual(steps, ["preemption"])

    def test_checkpoints_when_the_master_pushes_an_order_and_reports_the_step(self) -> None:
        order = trainyard_pb2.CheckpointOrder(id=3, deadline_unix_ms=1_900_000_000_000, reason="preempted by job 9")

        def with_orders(request: jobmaster_pb2.JobMasterRequest) -> Answer:
            kind = request.WhichOneof("body")
            if kind == "checkpoint_poll":  # no order yet
                return jobmaster_pb2.JobMasterResponse(checkpoint=trainyard_pb2.CheckpointOrder())
            if kind == "state_change" and request.state_change.state == trainyard_pb2.RUNNING:
                # The order arrives pushed, ahead of the answer.
                return [jobmaster_pb2.JobMasterResponse(checkpoint=order),
                        jobmaster_pb2.JobMasterResponse(state=jobmaster_pb2.StateReply(worker_id=4))]
            if kind == "checkpoint_done":
                return jobmaster_pb2.JobMasterResponse(checkpoint=order)
            return answer(request)

        master = ScriptedMaster(with_orders)
        env = trainyard.WorkerEnv.from_env({**WorkerEnvTest.BASE, "TRAINYARD_JOB_MASTER": master.address,
                                            "TRAINYARD_RESUME_STEP": "120"})
        self.assertEqual(env.resume_step, 120)
        seen: list[tuple[str, int]] = []
        with trainyard.Worker(env) as w:
            self.assertIsNone(w.checkpoint_if_requested(), "no callback, no order")
            def save(req: trainyard.CheckpointRequest) -> int:
                seen.append((req.reason, req.order))
                return 150

            w.on_checkpoint(save)
            self.assertIsNone(w.checkpoint_requested())
            w.running()
            self.assertEqual(w.checkpoint_requested(),
                             trainyard.CheckpointRequest(reason="preempted by job 9", deadline=1_900_000_000.0,
                                                         order=3))
            self.assertEqual(w.checkpoint_if_requested(), 150)
            self.assertIsNone(w.checkpoint_if_requested(), "answered: not asked again")
        master.close()
        self.assertEqual(seen, [("preempted by job 9", 3)])
        done = [r.checkpoint_done for r in master.requests if r.WhichOneof("body") == "checkpoint_done"]
        self.assertEqual([(d.id, d.step) for d in done], [(3, 150)])
        # Registering the first callback told the master this worker checkpoints.
        self.assertIn("checkpoint_poll", [r.WhichOneof("body") for r in master.requests])

    def test_an_order_pushed_right_after_the_registration_answer_is_taken(self) -> None:
        # A worker that (re)joins while its job is ordered to checkpoint gets
        # the order in the same write as its registration's answer.
        order = trainyard_pb2.CheckpointOrder(id=9, deadline_unix_ms=1_900_000_000_000, reason="time limit")

        def registered_then_order(request: jobmaster_pb2.JobMasterRequest) -> Answer:
            if request.WhichOneof("body") == "starting":
                reply = answer(request)
                assert reply is not None
                return [reply, jobmaster_pb2.JobMasterResponse(checkpoint=order)]
            return answer(request)

        master = ScriptedMaster(registered_then_order)
        env = trainyard.WorkerEnv.from_env({**WorkerEnvTest.BASE, "TRAINYARD_JOB_MASTER": master.address})
        with trainyard.Worker(env) as w:
            w.on_checkpoint(lambda req: 5)
            deadline = time.monotonic() + 30
            while w.checkpoint_requested() is None and time.monotonic() < deadline:
                time.sleep(0.01)  # the reader dispatches what followed the answer
            self.assertEqual(w.checkpoint_requested(),
                             trainyard.CheckpointRequest(reason="time limit", deadline=1_900_000_000.0, order=9))
        master.close()

    def test_follows_a_master_that_restarted(self) -> None:
        master = ScriptedMaster(answer, drop_first_barrier=True)
        env = trainyard.WorkerEnv.from_env({**WorkerEnvTest.BASE, "TRAINYARD_JOB_MASTER": master.address})
        with trainyard.Worker(env, reconnect_window=30) as w:
            w.running()
            self.assertEqual(w.barrier(timeout=30), 3)
        master.close()
        kinds = [r.WhichOneof("body") for r in master.requests if r.WhichOneof("body") != "ping"]
        self.assertEqual(kinds, ["starting", "state_change", "barrier", "starting", "barrier", "state_change"])
        again = master.requests[[r.WhichOneof("body") for r in master.requests].index("starting", 1)].starting
        self.assertEqual((again.info.worker_id, trainyard_pb2.WorkerState.Name(again.resume_state)), (4, "RUNNING"))
        self.assertEqual([r.barrier.generation for r in master.requests if r.HasField("barrier")], [3, 3])

    def test_unreachable_master(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
            env = trainyard.WorkerEnv.from_env({"TRAINYARD_JOB_MASTER": address})
            with self.assertRaises(trainyard.JobMasterError) as e:
                trainyard.Worker(env, connect_timeout=0.3)
        self.assertEqual(e.exception.code, "UNAVAILABLE")
        self.assertIn(f"cannot reach the job master at {address}", str(e.exception))


if __name__ == "__main__":
    unittest.main()
