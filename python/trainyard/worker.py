"""The worker side of the SDK: a training program's link to its job master.

A task of a job that has a job master (docs/jobmaster.md, "Which jobs get a
master") finds it in TRAINYARD_JOB_MASTER. A Worker registers there
(STARTING), pings, follows a master that restarted (trainyard._master_link),
and offers discovery (who the other workers are, worker 0's address) and
barriers, as the C++ worker library does
(src/jobmaster/client/job_master_client.h).

    with trainyard.Worker.from_env() as w:   # registers; COMPLETED on exit, ERROR on an exception
        w.running()
        w.barrier(timeout=60)
        os.environ.update(w.torch_env())     # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
        torch.distributed.init_process_group("gloo")

Checkpoints (docs/jobmaster.md, "Checkpoints"): when the job is preempted or
passes its time limit, the server orders it to checkpoint and the master
pushes the order to every worker that registered a callback with
on_checkpoint(). The training loop calls checkpoint_if_requested() once a
step: when an order is open it runs the callbacks and reports the step they
saved; once every such worker did, the job is stopped (and its next start
gets TRAINYARD_RESUME_STEP). A job without a master (pytorch) gets SIGTERM
and a grace instead: handle_sigterm_as_checkpoint() runs the callbacks then.

    w.on_checkpoint(lambda req: save(step))        # returns the step it saved
    for step in range(w.env.resume_step or 0, steps):
        train_one_step()
        w.checkpoint_if_requested()                # saved when ordered; SIGTERM follows
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import traceback
from typing import Any, Callable, Mapping, Optional

from trainyard._master_link import MasterLink, split_host_port
from trainyard._pb import jobmaster_pb2, trainyard_pb2
from trainyard.errors import JobMasterError, TaskEnvironmentError

@dataclasses.dataclass(frozen=True)
class WorkerEnv:
    """Who this task is, from the variables every Trainyard task gets.

    Attributes:
        master: the job master's host:port (TRAINYARD_JOB_MASTER).
        master_file: a file holding the master's current host:port, which the
            server rewrites when the master moves (TRAINYARD_JOB_MASTER_FILE; "" = none).
        job, role, index: the job's name, the task's role and index.
        worker_id: the task's worker id (-1: the master picks one).
        restart_count: how often the task was restarted before this attempt.
        ports: the ports allocated to the task (TRAINYARD_PORTS).
        job_secret: what the master asks of the job's workers (TRAINYARD_JOB_SECRET).
        checkpoint_dir: where the task keeps its checkpoints ("" = none given).
        node_address: the address of the task's node as the server knows it
            (TRAINYARD_NODE_ADDRESS): what the worker registers as its address.
        resume_step: the step the job's workers saved at its last coordinated
            checkpoint (TRAINYARD_RESUME_STEP; None: there was none).
    """

    master: str
    master_file: str = ""
    job: str = ""
    role: str = ""
    index: int = 0
    worker_id: int = -1
    restart_count: int = 0
    ports: tuple[int, ...] = ()
    job_secret: str = ""
    checkpoint_dir: str = ""
    node_address: str = ""
    resume_step: Optional[int] = None

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "WorkerEnv":
        """Reads the task's environment (os.environ by default).

        Raises TaskEnvironmentError naming the variable that is missing or
        malformed (TRAINYARD_JOB_MASTER is required: a job that has no master
        has none, see docs/jobmaster.md).
        """
        variables: Mapping[str, str] = os.environ if env is None else env
        master = variables.get("TRAINYARD_JOB_MASTER", "")
        if not master:
            raise TaskEnvironmentError(
                "TRAINYARD_JOB_MASTER is not set: it holds the job master's host:port and is set in every "
                "task of a job that has a master (framework none or tensorflow, or a spec that says "
                "`jobmaster: true`; a pytorch or mpi job has none unless its spec says so)")
        _check_host_port(master, "TRAINYARD_JOB_MASTER")

        def integer(name: str, default: int) -> int:
            text = variables.get(name, "")
            if not text:
                return default
            try:
                return int(text)
            except ValueError:
                raise TaskEnvironmentError(f"{name}='{text}' is not an integer") from None

        ports_text = variables.get("TRAINYARD_PORTS", "")
        try:
            ports = tuple(int(p) for p in ports_text.split(",") if p)
        except ValueError:
            ports = (-1,)
        if any(not 0 <= p <= 65535 for p in ports):
            raise TaskEnvironmentError(f"TRAINYARD_PORTS='{ports_text}' is not a comma-separated list of ports")
        return cls(master=master, master_file=variables.get("TRAINYARD_JOB_MASTER_FILE", ""),
                   job=variables.get("TRAINYARD_JOB", ""), role=variables.get("TRAINYARD_ROLE", ""),
                   index=integer("TRAINYARD_INDEX", 0), worker_id=integer("TRAINYARD_WORKER_ID", -1),
                   restart_count=integer("TRAINYARD_RESTART_COUNT", 0), ports=ports,
                   job_secret=variables.get("TRAINYARD_JOB_SECRET", ""),
                   checkpoint_dir=variables.get("TRAINYARD_CHECKPOINT_DIR", ""),
                   node_address=variables.get("TRAINYARD_NODE_ADDRESS", ""),
                   resume_step=integer("TRAINYARD_RESUME_STEP", -1) if variables.get("TRAINYARD_RESUME_STEP")
                   else None)

    def current_master(self) -> str:
        """The master's address now: the master file's first line when it has one."""
        if self.master_file:
            try:
                with open(self.master_file, encoding="utf-8") as f:
                    line = f.readline().strip()
                if line:
                    return line
            except OSError:
                pass
        return self.master


def _check_host_port(address: str, what: str) -> None:
    if split_host_port(address) is None:
        raise TaskEnvironmentError(f"{what}='{address}' is not host:port")


@dataclasses.dataclass(frozen=True)
class WorkerStatus:
    """One worker as the master sees it.

    Attributes:
        worker_id, role, index, task_name: who it is.
        address: the host it registered from; ports: its allocated ports.
        state: UNASSIGNED, STARTING, RUNNING, COMPLETED or ERROR.
        reason: why it is in ERROR.
        connected: whether its connection is open; in_barrier: whether it
            waits in the open barrier.
    """

    worker_id: int
    role: str
    index: int
    task_name: str
    address: str
    ports: tuple[int, ...]
    state: str
    reason: str
    restart_count: int
    connected: bool
    in_barrier: bool

    @classmethod
    def from_proto(cls, w: jobmaster_pb2.WorkerStatus) -> "WorkerStatus":
        """The WorkerStatus of the wire's."""
        return cls(worker_id=w.info.worker_id, role=w.info.role, index=w.info.index,
                   task_name=w.info.task_name, address=w.info.ip, ports=tuple(w.info.ports),
                   state=trainyard_pb2.WorkerState.Name(w.state), reason=w.reason,
                   restart_count=w.restart_count, connected=w.connected, in_barrier=w.in_barrier)


@dataclasses.dataclass(frozen=True)
class CheckpointRequest:
    """What a checkpoint callback is asked.

    Attributes:
        reason: why ("preempted by job 12", "SIGTERM", ...).
        deadline: time.time() by which the checkpoint must be saved (None = no limit given).
        order: the server's order it answers (0: none, as for SIGTERM).
    """

    reason: str
    deadline: Optional[float] = None
    order: int = 0


# A checkpoint callback: saves the program's state and returns the step it
# saved (or None).
CheckpointCallback = Callable[[CheckpointRequest], Optional[int]]


class Worker:
    """A registered worker of a job.

    Use Worker.from_env() in a task. The constructor connects to the master,
    registers (STARTING) and starts pinging; it raises JobMasterError when the
    master cannot be reached within `connect_timeout` seconds or refuses the
    worker. When the master goes away later (it crashed and is restarted),
    the Worker reconnects within `reconnect_window` seconds and registers
    again with its id and state; a barrier in flight is entered again, other
    calls meanwhile fail with JobMasterError UNAVAILABLE and may be retried.

    A Worker is a context manager: leaving the block reports COMPLETED, or
    ERROR (with the exception as the reason) when it raised; then close()
    ends the connection.

    Args:
        env: who this task is (WorkerEnv.from_env()).
        connect_timeout: seconds to reach the master and register.
        ping_interval: seconds between pings (keep it at the master's --ping-interval-ms).
        reconnect_window: seconds to get the master back after it went away.
        address: the address to register for others to reach this worker
            at; None: the node's (TRAINYARD_NODE_ADDRESS), else the master
            takes the connection's peer address.
    """

    def __init__(self, env: WorkerEnv, *, connect_timeout: float = 30.0, ping_interval: float = 1.0,
                 reconnect_window: float = 60.0, address: Optional[str] = None):
        for name, value in (("connect_timeout", connect_timeout), ("ping_interval", ping_interval),
                            ("reconnect_window", reconnect_window)):
            if value <= 0:
                raise ValueError(f"{name}: must be positive seconds, got {value}")
        self.env = env
        self._checkpoint_callbacks: list[CheckpointCallback] = []
        self._answered_order = 0  # the last order this worker reported a checkpoint for
        info = trainyard_pb2.WorkerInfo(
            worker_id=env.worker_id, ip=address or env.node_address, node_ip=env.node_address,
            role=env.role, index=env.index, ports=list(env.ports),
            task_name=f"{env.job}-{env.role}-{env.index}" if env.job else "")
        starting = jobmaster_pb2.Starting(info=info, restart_count=env.restart_count, pings=True,
                                          job_secret=env.job_secret)
        self._link = MasterLink(env.current_master, starting, ping_interval=ping_interval,
                                connect_timeout=connect_timeout, reconnect_window=reconnect_window)
        reply = self._link.registered
        self.worker_id: int = reply.worker_id
        self.num_workers: int = reply.num_workers
        self._next_barrier = reply.barrier_generation

    @classmethod
    def from_env(cls, **kwargs: Any) -> "Worker":
        """A Worker for this task, from its environment (WorkerEnv.from_env);
        `kwargs` as the constructor's."""
        return cls(WorkerEnv.from_env(), **kwargs)

    def _call(self, request: jobmaster_pb2.JobMasterRequest, timeout: Optional[float],
              what: str) -> jobmaster_pb2.JobMasterResponse:
        return self._link.call(request, timeout, what)

    def close(self) -> None:
        """Stops pinging and closes the connection (the worker's state at the master stays)."""
        self._link.close()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: object) -> None:
        try:
            if exc is None:
                self.completed()
            else:
                try:
                    self.failed(f"{type(exc).__name__}: {exc}")
                except JobMasterError:
                    pass  # the program's own exception is what propagates
        finally:
            self.close()

    # ---- life-cycle ----

    def _set_state(self, state: str, reason: str, timeout: float) -> None:
        value = trainyard_pb2.WorkerState.Value(state)
        change = jobmaster_pb2.StateChange(state=value, reason=reason)
        self._call(jobmaster_pb2.JobMasterRequest(state_change=change), timeout, f"state {state}")
        self._link.state_accepted(state, reason)

    def running(self, timeout: float = 10.0) -> None:
        """Tells the master this worker runs (training started)."""
        self._set_state("RUNNING", "", timeout)

    def completed(self, timeout: float = 10.0) -> None:
        """Tells the master this worker finished its work; when every worker
        has, the master ends the job SUCCEEDED."""
        self._set_state("COMPLETED", "", timeout)

    def failed(self, reason: str, timeout: float = 10.0) -> None:
        """Tells the master this worker failed (ERROR, with `reason`); the
        task's restart policy decides what follows."""
        if not reason:
            raise ValueError("reason: say why the worker failed")
        self._set_state("ERROR", reason, timeout)

    # ---- discovery and barriers ----

    def workers(self, wait_for_all: bool = False, timeout: Optional[float] = None) -> list[WorkerStatus]:
        """The job's workers, by id: those that joined so far (including those
        that left), or with wait_for_all=True all of them once every one
        joined (JobMasterError DEADLINE_EXCEEDED naming the missing ones after
        `timeout` seconds; None = the master's default wait)."""
        mode = jobmaster_pb2.RESPONSE_AFTER_ALL_JOINED if wait_for_all else jobmaster_pb2.IMMEDIATE
        request = jobmaster_pb2.ListWorkersRequest(mode=mode, timeout_ms=_millis(timeout, "timeout"))
        reply = self._call(jobmaster_pb2.JobMasterRequest(list_workers=request), timeout,
                           "list workers").workers
        return [WorkerStatus.from_proto(w) for w in reply.workers]

    def rank_zero(self, timeout: Optional[float] = None) -> WorkerStatus:
        """Worker 0 as it registered, once it joined (its address and ports:
        the rendezvous point of a framework)."""
        request = jobmaster_pb2.RankZeroRequest(timeout_ms=_millis(timeout, "timeout"))
        reply = self._call(jobmaster_pb2.JobMasterRequest(rank_zero=request), timeout,
                           "rank zero").rank_zero
        return WorkerStatus.from_proto(jobmaster_pb2.WorkerStatus(info=reply.info, state=trainyard_pb2.RUNNING,
                                                                  restart_count=reply.restart_count))

    def barrier(self, timeout: Optional[float] = None) -> int:
        """Returns once every worker of the job reached this barrier; its
        generation (0 for the job's first barrier).

        Raises JobMasterError: ABORTED when a worker ended while others
        waited, DEADLINE_EXCEEDED naming the missing workers after `timeout`
        seconds (None = the master's default), UNAVAILABLE when the master
        went away.
        """
        request = jobmaster_pb2.BarrierRequest(timeout_ms=_millis(timeout, "timeout"),
                                               generation=self._next_barrier)
        reply = self._call(jobmaster_pb2.JobMasterRequest(barrier=request), timeout, "barrier").barrier
        self._next_barrier = reply.generation + 1
        return reply.generation

    def torch_env(self, timeout: Optional[float] = None) -> dict[str, str]:
        """The variables torch.distributed's env:// rendezvous reads, from the
        master's discovery: MASTER_ADDR and MASTER_PORT (worker 0's address
        and first allocated port), RANK (this worker's id), WORLD_SIZE.
        For jobs with a master (a pytorch job gets these from Trainyard itself).
        Raises JobMasterError when worker 0 has no port (give its role `ports: 1`)."""
        zero = self.rank_zero(timeout)
        if not zero.ports:
            raise JobMasterError("FAILED_PRECONDITION",
                                 "worker 0 has no port for the rendezvous: give its role `resources: {ports: 1}`")
        return {"MASTER_ADDR": zero.address, "MASTER_PORT": str(zero.ports[0]), "RANK": str(self.worker_id),
                "WORLD_SIZE": str(self.num_workers)}

    # ---- checkpoints ----

    def on_checkpoint(self, callback: CheckpointCallback) -> None:
        """Registers `callback`, called when the job asks for a checkpoint
        (checkpoint_if_requested(), request_checkpoint(), or the SIGTERM of
        handle_sigterm_as_checkpoint()). The first registration tells the
        master that this worker checkpoints: an order then waits for its
        report (checkpoint_done()) until the order's deadline.
        """
        if not callable(callback):
            raise TypeError(f"callback: expected a callable, got {type(callback).__name__}")
        self._checkpoint_callbacks.append(callback)
        if len(self._checkpoint_callbacks) == 1:
            # The master waits for this worker when its job is ordered to
            # checkpoint; an order already open arrives with its answer.
            self._link.declare_checkpoints()

    def checkpoint_requested(self) -> Optional[CheckpointRequest]:
        """The job's open order to checkpoint that this worker has not answered
        yet, else None. A local read (the master pushes orders), cheap enough
        for every step."""
        order = self._link.order()
        if order.id == 0 or order.id <= self._answered_order:
            return None
        return CheckpointRequest(reason=order.reason, deadline=order.deadline_unix_ms / 1000.0, order=order.id)

    def checkpoint_if_requested(self, timeout: float = 10.0) -> Optional[int]:
        """When the job is ordered to checkpoint: runs the callbacks and reports
        the step they saved to the master; returns that step. None when no
        order is open (or this worker answered it already).

        Raises ValueError when no callback returned a step."""
        request = self.checkpoint_requested()
        if request is None:
            return None
        step = self.request_checkpoint(request.reason, request.deadline, request.order)
        if step is None:
            raise ValueError("no checkpoint callback returned the step it saved (on_checkpoint's callback "
                             "returns the step)")
        self.checkpoint_done(step, request.order, timeout)
        return step

    def checkpoint_done(self, step: int, order: int = 0, timeout: float = 10.0) -> None:
        """Tells the master this worker saved its checkpoint at `step` for
        `order` (0: the open one)."""
        if step < 0:
            raise ValueError(f"step: must not be negative, got {step}")
        done = jobmaster_pb2.CheckpointDone(id=order, step=step)
        reply = self._call(jobmaster_pb2.JobMasterRequest(checkpoint_done=done), timeout, "a checkpoint report")
        self._answered_order = max(self._answered_order, order or reply.checkpoint.id)

    def request_checkpoint(self, reason: str, deadline: Optional[float] = None, order: int = 0) -> Optional[int]:
        """Runs the registered checkpoint callbacks in order; returns the last
        step one of them reported (None when none did)."""
        step: Optional[int] = None
        for callback in list(self._checkpoint_callbacks):
            saved = callback(CheckpointRequest(reason=reason, deadline=deadline, order=order))
            if saved is not None:
                step = saved
        return step

    def handle_sigterm_as_checkpoint(self, exit_code: int = 143) -> None:
        """Makes SIGTERM (what a kill or a preemption sends first) run the
        checkpoint callbacks, then exit with `exit_code` (standard output and
        error flushed; a callback's exception is printed). Call from the main thread."""
        def handler(signum: int, frame: object) -> None:
            try:
                self.request_checkpoint("SIGTERM")
            except Exception:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(exit_code)
        signal.signal(signal.SIGTERM, handler)


def _millis(seconds: Optional[float], name: str) -> int:
    if seconds is None:
        return 0
    if seconds <= 0:
        raise ValueError(f"{name}: must be positive seconds, got {seconds}")
    return max(1, int(seconds * 1000))
