"""Jobs and tasks as the server shows them, as plain Python values.

Each view keeps the protobuf message it was made from (`proto`) for the
fields not copied here (proto/service.proto, JobView and TaskView).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from trainyard._pb import service_pb2, trainyard_pb2

FINISHED_STATES = frozenset({"SUCCEEDED", "FAILED", "KILLED"})


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    name: str = enum.Name(value)
    return name[len(prefix):] if name.startswith(prefix) else name


@dataclasses.dataclass(frozen=True)
class Task:
    """One task of a job.

    Attributes:
        name: JOB-ROLE-INDEX.
        role, index: its replica role and index in the role.
        worker_id: its id at the job master (stable across restarts).
        node: the node it was placed on ("" while pending).
        state: PENDING, LAUNCHING, RUNNING, SUCCEEDED, FAILED, KILLED or RESTARTING.
        restarts: how often it was restarted.
        exit_code: the last attempt's exit code (None while none ended).
        service: its role is of kind service (Client.service_url reaches it).
    """

    name: str
    role: str
    index: int
    worker_id: int
    node: str
    state: str
    restarts: int
    exit_code: Optional[int]
    service: bool
    proto: service_pb2.TaskView = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, view: service_pb2.TaskView) -> "Task":
        """The Task of a TaskView."""
        return cls(name=view.name, role=view.role, index=view.index, worker_id=view.worker_id,
                   node=view.node, state=_enum_name(trainyard_pb2.TaskState, view.state, "TASK_"),
                   restarts=view.restarts,
                   exit_code=view.last_exit.exit_code if view.HasField("last_exit") else None,
                   service=view.service, proto=view)


@dataclasses.dataclass(frozen=True)
class Job:
    """A job as `trainyard describe` shows it.

    Attributes:
        name: the job's unique name (the server may have suffixed the spec's).
        id: its numeric id.
        user, queue: who submitted it and the queue it runs in.
        state: QUEUED, SCHEDULED, STARTING, RUNNING, SUCCEEDED, FAILED or KILLED.
        reason: why it waits (pending) or how it ended.
        tasks: its tasks.
        events: (unix ms, kind, text) of what happened to it, oldest first
            (describe only; lists and watches leave them out).
    """

    name: str
    id: int
    user: str
    queue: str
    state: str
    reason: str
    tasks: list[Task]
    events: list[tuple[int, str, str]]
    proto: service_pb2.JobView = dataclasses.field(repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """True once the job has ended (SUCCEEDED, FAILED or KILLED)."""
        return self.state in FINISHED_STATES

    @classmethod
    def from_proto(cls, view: service_pb2.JobView) -> "Job":
        """The Job of a JobView."""
        return cls(name=view.name, id=view.id, user=view.user, queue=view.queue,
                   state=_enum_name(trainyard_pb2.JobState, view.state, "JOB_"), reason=view.reason,
                   tasks=[Task.from_proto(t) for t in view.tasks],
                   events=[(e.time_unix_ms, e.kind, e.text) for e in view.events], proto=view)


@dataclasses.dataclass(frozen=True)
class Account:
    """A finished job as accounting keeps it (`trainyard history`, docs/accounting.md).

    Attributes:
        id, name, user, queue: the job (a deleted job's name as it was).
        state: SUCCEEDED, FAILED, KILLED or DEADLINE_EXCEEDED.
        submit_ms, start_ms, end_ms: Unix ms (start_ms 0: it never ran).
        wait_s, elapsed_s: submit to first run, first run to end.
        gpus: GPUs asked by all its tasks (a share as its fraction).
        gpu_hours, cpu_hours, memory_gb_hours: what its tasks held, every attempt.
        attempts, restarts: attempts started and restarts, all tasks.
        exit_code, exit_signal, exit_task: the highest exit of its tasks' last attempts.
        deleted: deleted since (gone from the live views).
        settled: False while a task still holds its place (the hours grow).
    """

    id: int
    name: str
    user: str
    queue: str
    state: str
    submit_ms: int
    start_ms: int
    end_ms: int
    wait_s: float
    elapsed_s: float
    gpus: float
    gpu_hours: float
    cpu_hours: float
    memory_gb_hours: float
    attempts: int
    restarts: int
    exit_code: int
    exit_signal: int
    exit_task: str
    deleted: bool
    settled: bool
    proto: service_pb2.JobAccount = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, a: service_pb2.JobAccount) -> "Account":
        """The Account of a JobAccount."""
        return cls(id=a.id, name=a.name, user=a.user, queue=a.queue,
                   state=_enum_name(trainyard_pb2.JobState, a.state, "JOB_"), submit_ms=a.submit_time_unix_ms,
                   start_ms=a.start_time_unix_ms, end_ms=a.end_time_unix_ms, wait_s=a.wait_ms / 1000.0,
                   elapsed_s=a.elapsed_ms / 1000.0, gpus=a.gpus, gpu_hours=a.gpu_hours, cpu_hours=a.cpu_hours,
                   memory_gb_hours=a.memory_gb_hours, attempts=a.attempts, restarts=a.restarts,
                   exit_code=a.exit_code, exit_signal=a.exit_signal, exit_task=a.exit_task, deleted=a.deleted,
                   settled=a.settled, proto=a)


@dataclasses.dataclass(frozen=True)
class UsageRow:
    """Usage of one user or queue over a period (`trainyard usage`); key "" is the total."""

    key: str
    jobs: int
    succeeded: int
    failed: int
    killed: int
    deadline_exceeded: int
    gpu_hours: float
    cpu_hours: float
    memory_gb_hours: float
    elapsed_hours: float
    mean_wait_s: float

    @classmethod
    def from_proto(cls, r: service_pb2.UsageRow) -> "UsageRow":
        """The UsageRow of a UsageRow message."""
        return cls(key=r.key, jobs=r.jobs, succeeded=r.succeeded, failed=r.failed, killed=r.killed,
                   deadline_exceeded=r.deadline_exceeded, gpu_hours=r.gpu_hours, cpu_hours=r.cpu_hours,
                   memory_gb_hours=r.memory_gb_hours, elapsed_hours=r.elapsed_hours, mean_wait_s=r.mean_wait_s)


@dataclasses.dataclass(frozen=True)
class ResourceSample:
    """What a task (or a job, summed) used at one time, as its agent sampled it."""

    time: float              # Unix seconds, the server's clock on arrival
    cpu_cores: float         # averaged since the previous sample
    memory_bytes: int        # working set of its cgroup, or resident set of its process tree
    # GPUs busy (a shared GPU's load apportioned by share); None: not known
    # (a GPU whose driver does not tell, as under MIG)
    gpus_busy: Optional[float]
    gpu_memory_bytes: int

    @classmethod
    def from_proto(cls, s: service_pb2.TaskResourceSample) -> "ResourceSample":
        """The ResourceSample of a TaskResourceSample message."""
        return cls(time=s.time_unix_ms / 1000.0, cpu_cores=s.cpu_milli / 1000.0, memory_bytes=s.memory_bytes,
                   gpus_busy=None if s.gpu_busy_milli < 0 else s.gpu_busy_milli / 1000.0,
                   gpu_memory_bytes=s.gpu_memory_bytes)


@dataclasses.dataclass(frozen=True)
class TaskResources:
    """One task's samples of the last 15 minutes (`trainyard top`), oldest first."""

    task: str
    role: str
    index: int
    attempt: int
    node: str
    state: str
    memory_limit_bytes: int  # as its node enforces it (0: none enforced)
    cpu_cores_asked: float
    gpus_held: float
    near_memory_limit: bool  # its last sample used 90 % of its memory limit or more
    source: str              # "cgroup v2", "cgroup v1", "process tree"
    samples: tuple[ResourceSample, ...]

    @property
    def latest(self) -> Optional[ResourceSample]:
        """Its newest sample; None when it was not sampled yet."""
        return self.samples[-1] if self.samples else None

    @classmethod
    def from_proto(cls, t: service_pb2.TaskResourcesView) -> "TaskResources":
        """The TaskResources of a TaskResourcesView message."""
        return cls(task=t.task, role=t.role, index=t.index, attempt=t.attempt, node=t.node, state=_enum_name(trainyard_pb2.TaskState, t.state, "TASK_"),
                   memory_limit_bytes=t.memory_limit_bytes, cpu_cores_asked=t.vcores_milli / 1000.0,
                   gpus_held=t.gpu_milli / 1000.0, near_memory_limit=t.near_memory_limit, source=t.source,
                   samples=tuple(ResourceSample.from_proto(s) for s in t.samples))


@dataclasses.dataclass(frozen=True)
class ExecResult:
    """How a command run in a running task ended (`trainyard exec`, docs/exec.md)."""

    node: str         # where it ran
    attempt: int      # the task's attempt it ran in
    exit_code: int    # -1 when a signal ended it
    signal: int       # the signal that ended it (0: none)
    stdout: bytes
    stderr: bytes
    message: str      # why it was ended early ("" when it ended on its own)

    @property
    def returncode(self) -> int:
        """The exit code, or 128 + the signal, as a shell (and the CLI) tells it."""
        return 128 + self.signal if self.signal > 0 else self.exit_code
