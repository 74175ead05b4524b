"""The client side of the SDK: jobs through the server's gRPC API.

A Client speaks to the server the way the `trainyard` CLI does
(src/cli/client.cc): the same server address, token and TLS CA, found by the
same rules (trainyard.config), the token as "authorization: Bearer TOKEN"
metadata, TLS verified with the cluster's CA when one is named.

    with trainyard.Client() as c:
        job = c.submit({"name": "hello", "replicas": {"worker": {"command": ["echo", "hi"]}}})
        print(c.wait(job).state)           # SUCCEEDED
        print(c.log_text(job))             # hi
"""
from __future__ import annotations

import ipaddress
import warnings
from typing import Iterable, Iterator, Optional, Sequence

import grpc

from trainyard import errors
from trainyard._pb import service_pb2, service_pb2_grpc, trainyard_pb2
from trainyard.config import ClientConfig, resolve_config
from trainyard.logs import LineAssembler, LogLine, split_stamp
from trainyard.spec import Spec, spec_to_yaml
from trainyard.views import Account, ExecResult, Job, ResourceSample, TaskResources, UsageRow

_JOB_STATES = ("QUEUED", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED", "KILLED")
_FINISHED_STATES = ("SUCCEEDED", "FAILED", "KILLED", "DEADLINE_EXCEEDED")


def _ms(seconds: Optional[float]) -> int:
    """Unix seconds as the API's Unix ms (None: 0, the API's default)."""
    if seconds is None:
        return 0
    if seconds < 0:
        raise errors.InvalidArgument("INVALID_ARGUMENT", f"since/until: {seconds} is before 1970")
    return int(seconds * 1000)


def is_local_address(address: str) -> bool:
    """True when traffic to `address` stays on this host (as security::IsLocalAddress);
    a comma-separated list when every entry does."""
    if "," in address:
        return all(is_local_address(one) for one in address.split(","))
    if address.startswith("unix:") or ":" not in address:
        return True
    host = address[:address.rfind(":")]
    return host in ("localhost", "[::1]", "::1") or host.startswith("127.")


def server_target(server: str) -> "tuple[str, list[tuple[str, object]]]":
    """The gRPC target and channel options for `server`: one address as it
    is; a comma-separated list (every server of one etcd store, IP:port
    each, as `--cluster-servers` gives tasks in TRAINYARD_SERVER) as one
    target whose calls go to whichever server leads, as the CLI's
    (common/server_list_channel.h)."""
    if "," not in server:
        return server, []
    family = ""
    for entry in server.split(","):
        host, _, port = entry.rpartition(":")
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        try:
            kind = "ipv6" if ipaddress.ip_address(bare).version == 6 else "ipv4"
            if (kind == "ipv6") != host.startswith("[") or not 0 < int(port) < 65536:
                raise ValueError(entry)
        except ValueError:
            raise errors.ConfigError(f"server: '{server}': '{entry}' is not IP:port (a list names servers by "
                                     "address)") from None
        if family and family != kind:
            raise errors.ConfigError(f"server: '{server}' mixes IPv4 and IPv6")
        family = kind
    return f"{family}:{server}", [("grpc.lb_policy_name", "round_robin"),
                                   ("grpc.default_authority", server.split(",")[0]),
                                   ("grpc.min_reconnect_backoff_ms", 3000),
                                   ("grpc.keepalive_time_ms", 2000),
                                   ("grpc.keepalive_timeout_ms", 3000),
                                   ("grpc.http2.max_pings_without_data", 0),
                                   ("grpc.use_local_subchannel_pool", 1)]


def _job_name(job: "str | Job") -> str:
    name = job.name if isinstance(job, Job) else job
    if not isinstance(name, str) or not name:
        raise errors.InvalidArgument("INVALID_ARGUMENT", f"job: expected a job name or a Job, got {name!r}")
    return name


class Client:
    """A connection to a Trainyard server.

    Args:
        server: host:port of the server; None: $TRAINYARD_SERVER, else the
            client config's, else 127.0.0.1:7450.
        token: the user's token; None: $TRAINYARD_TOKEN, else the config's.
        ca_file: the cluster CA to verify the server's TLS certificate with;
            None: $TRAINYARD_CA_FILE, else the config's caFile; "" = plaintext.
        timeout: seconds each unary call may take.

    Raises ConfigError when the client config cannot be used or the CA file
    cannot be read. A Client is a context manager; close() frees the channel.
    """

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None,
                 ca_file: Optional[str] = None, timeout: float = 30.0):
        if timeout <= 0:
            raise errors.ConfigError(f"timeout: must be positive, got {timeout}")
        self.config: ClientConfig = resolve_config(server, token, ca_file)
        self.timeout = timeout
        self._metadata: tuple[tuple[str, str], ...] = ()
        self._channel = self._make_channel()
        self._stub = service_pb2_grpc.TrainyardStub(self._channel)  # type: ignore[no-untyped-call]

    def _make_channel(self) -> grpc.Channel:
        cfg = self.config
        options: "list[tuple[str, object]]" = [("grpc.max_receive_message_length", 64 << 20),
                                                ("grpc.initial_reconnect_backoff_ms", 100),
                                                ("grpc.max_reconnect_backoff_ms", 1000)]
        if cfg.token:
            if cfg.ca_file or is_local_address(cfg.server):
                self._metadata = (("authorization", "Bearer " + cfg.token),)
            else:
                warnings.warn(f"trainyard: not sending the token in clear to {cfg.server}: name the "
                              "cluster's CA (ca_file, TRAINYARD_CA_FILE or the client config's caFile)")
        target, list_options = server_target(cfg.server)
        options += list_options
        if not cfg.ca_file:
            return grpc.insecure_channel(target, options=options)
        try:
            with open(cfg.ca_file, "rb") as f:
                pem = f.read()
        except OSError as e:
            raise errors.ConfigError(f"caFile: the server's CA {cfg.ca_file}: {e.strerror}") from None
        if not pem:
            raise errors.ConfigError(f"caFile: the server's CA {cfg.ca_file} is empty")
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=pem),
                                   options=options)

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _error(self, e: grpc.RpcError, what: str) -> errors.TrainyardError:
        code = e.code() if isinstance(e, grpc.Call) else grpc.StatusCode.UNKNOWN
        details = (e.details() if isinstance(e, grpc.Call) else str(e)) or ""
        name = code.name if code else "UNKNOWN"
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            hint = (f"; TLS: the server's certificate must be signed by the CA in {self.config.ca_file}"
                    if self.config.ca_file else "; a server that serves TLS needs its CA: ca_file, "
                    "TRAINYARD_CA_FILE or caFile in the client config")
            return errors.Unavailable(name, f"cannot reach a Trainyard server at {self.config.server}: "
                                      f"{details}{hint}", what)
        if code == grpc.StatusCode.NOT_FOUND:
            return errors.NotFoundError(name, details, what)
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return errors.InvalidArgument(name, details, what)
        return errors.ServerError(name, details, what)

    # ---- jobs ----

    def submit(self, spec: Spec) -> str:
        """Submits a job and returns its name (unique; the server may suffix the spec's).

        `spec` is a mapping (the YAML's structure: name, replicas, ...), YAML
        text (a str), or the path of a YAML file (a pathlib.Path or other
        os.PathLike). The fields are those of docs/job-spec.md.

        Raises SpecError listing every problem ("replicas.worker.count:
        ...") when the spec is wrong, ServerError when it is refused
        (PERMISSION_DENIED for a queue or priority not allowed, ...).
        """
        request = service_pb2.SubmitRequest(yaml=spec_to_yaml(spec).encode("utf-8"))
        try:
            response = self._stub.Submit(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            error = self._error(e, "submit")
            if isinstance(error, errors.InvalidArgument):
                raise errors.SpecError([line for line in error.details.split("\n") if line]) from None
            raise error from None
        return str(response.job)

    def describe(self, job: "str | Job") -> Job:
        """The job as it is now, with its tasks and events. NotFoundError when there is none."""
        name = _job_name(job)
        try:
            view = self._stub.DescribeJob(service_pb2.DescribeJobRequest(job=name),
                                          timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise self._error(e, f"describe {name}") from None
        return Job.from_proto(view)

    def history(self, since: Optional[float] = None, until: Optional[float] = None, *, user: str = "",
                queue: str = "", name: str = "", states: Sequence[str] = ()) -> list[Account]:
        """Finished jobs as accounting keeps them (deleted ones too), oldest end first.

        Args:
            since, until: the period, Unix seconds (a job is in it when it
                ended in [since, until)); None: the oldest kept / now.
            user, queue: only those of this user / queue ("" = any).
            name: only this job, or an array's elements.
            states: only jobs that ended so (SUCCEEDED, FAILED, KILLED, DEADLINE_EXCEEDED).
        """
        codes = []
        for i, state in enumerate(states):
            if state not in _FINISHED_STATES:
                raise errors.InvalidArgument(
                    "INVALID_ARGUMENT", f"states[{i}]: {state!r} is not a finished state; one of "
                    f"{', '.join(_FINISHED_STATES)}")
            codes.append(trainyard_pb2.JobState.Value("JOB_" + state))
        request = service_pb2.HistoryRequest(user=user, queue=queue, name=name, states=codes, page_size=5000,
                                             since_unix_ms=_ms(since), until_unix_ms=_ms(until))
        accounts: list[Account] = []
        while True:  # the server answers in pages
            try:
                response = self._stub.History(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                raise self._error(e, "history") from None
            accounts.extend(Account.from_proto(a) for a in response.jobs)
            if not response.next_page_token:
                return accounts
            request.page_token = response.next_page_token

    def usage(self, since: Optional[float] = None, until: Optional[float] = None, *, by: str = "user",
              user: str = "", queue: str = "") -> tuple[list[UsageRow], UsageRow]:
        """Usage per user (by="user") or queue (by="queue") over the jobs that ended in
        [since, until) (Unix seconds; None: the oldest kept / now): the rows, most
        GPU-hours first, and the total."""
        if by not in ("user", "queue"):
            raise errors.InvalidArgument("INVALID_ARGUMENT", f"by: {by!r} is not user or queue")
        request = service_pb2.UsageRequest(group_by=by, user=user, queue=queue, since_unix_ms=_ms(since),
                                           until_unix_ms=_ms(until))
        try:
            response = self._stub.Usage(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise self._error(e, "usage") from None
        return [UsageRow.from_proto(r) for r in response.rows], UsageRow.from_proto(response.total)

    def resources(self, job: str, since: Optional[float] = None) -> tuple[list[TaskResources], list[ResourceSample]]:
        """What each task of `job` uses, as its agent sampled it (`trainyard top`): every task
        with its samples of the last 15 minutes (or since `since`, Unix seconds), oldest first,
        and the job's sums per sample interval."""
        request = service_pb2.JobResourcesRequest(job=job, since_unix_ms=_ms(since))
        try:
            response = self._stub.JobResources(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise self._error(e, "resources") from None
        return ([TaskResources.from_proto(t) for t in response.tasks],
                [ResourceSample.from_proto(s) for s in response.totals])

    def service_url(self, job: str, role: str = "", index: int = 0) -> str:
        """The address of a running service task (a role of kind: service) through the
        server's proxy, for a browser (`trainyard url`, docs/services.md): the job's first
        service when `role` is "". The address is the caller's own and expires (12 hours)."""
        request = service_pb2.ServiceLinkRequest(job=job, role=role, index=index)
        try:
            r = self._stub.ServiceLink(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise self._error(e, "service_url") from None
        host = r.http_host
        if not host:
            server = self.config.server.removeprefix("dns:///").removeprefix("ipv4:")
            host = "" if server.startswith("unix:") else server.rsplit(":", 1)[0] if ":" in server else server
            host = host or "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"{r.http_scheme}://{host}:{r.http_port}{r.path}"

    def list(self, include_finished: bool = False, user: str = "", queue: str = "",
             states: Sequence[str] = ()) -> list[Job]:
        """The jobs the caller may see (without their events).

        Args:
            include_finished: also jobs that ended.
            user, queue: only those of this user / queue ("" = any).
            states: only jobs in one of these states (QUEUED, ..., KILLED);
                a finished state implies include_finished.
        """
        codes = []
        for i, state in enumerate(states):
            if state not in _JOB_STATES:
                raise errors.InvalidArgument(
                    "INVALID_ARGUMENT", f"states[{i}]: {state!r} is not a job state; one of {', '.join(_JOB_STATES)}")
            codes.append(trainyard_pb2.JobState.Value("JOB_" + state))
        request = service_pb2.ListJobsRequest(include_finished=include_finished, user=user, queue=queue,
                                              states=codes)
        jobs: list[Job] = []
        while True:  # the server answers in pages
            try:
                response = self._stub.ListJobs(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                raise self._error(e, "list") from None
            jobs.extend(Job.from_proto(v) for v in response.jobs)
            if not response.next_page_token:
                return jobs
            request.page_token = response.next_page_token

    def watch(self, job: "str | Job", timeout: Optional[float] = None) -> Iterator[Job]:
        """The job now, then again each time its state or reason changes.

        Follows the server's WatchJob stream; ends after the view of the
        job's end. `timeout` (seconds; None = none) bounds the whole watch:
        past it the iteration raises WaitTimeout.
        """
        name = _job_name(job)
        stream = self._stub.WatchJob(service_pb2.WatchJobRequest(job=name), timeout=timeout,
                                     metadata=self._metadata)
        try:
            for view in stream:
                yield Job.from_proto(view)
        except grpc.RpcError as e:
            if timeout is not None and isinstance(e, grpc.Call) and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise errors.WaitTimeout(f"watch {name}: the job did not end within {timeout}s") from None
            raise self._error(e, f"watch {name}") from None
        finally:
            stream.cancel()

    def wait(self, job: "str | Job", timeout: Optional[float] = None) -> Job:
        """Waits until the job ends and returns its last view (state SUCCEEDED,
        FAILED or KILLED: check `.state`). Raises WaitTimeout after `timeout`
        seconds (None = no limit)."""
        last: Optional[Job] = None
        for view in self.watch(job, timeout=timeout):
            last = view
            if view.finished:
                return view
        if last is None:
            raise errors.ServerError("UNKNOWN", f"the watch of {_job_name(job)} ended without a view")
        return self.describe(last.name)

    def kill(self, job: "str | Job", reason: str = "") -> str:
        """Kills the job (its tasks get SIGTERM, then SIGKILL after the grace)
        and returns its state after the kill ("KILLED", or how it had ended)."""
        name = _job_name(job)
        try:
            response = self._stub.KillJob(service_pb2.KillJobRequest(job=name, reason=reason),
                                          timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise self._error(e, f"kill {name}") from None
        return str(trainyard_pb2.JobState.Name(response.state)).removeprefix("JOB_")

    # ---- a command in a running task ----

    def exec(self, job: "str | Job", role: str, command: Sequence[str], index: int = 0, *,
             stdin: Optional[bytes] = None, timeout: Optional[float] = None) -> ExecResult:
        """Runs `command` in task ROLE/INDEX of the running job, as the task
        runs (its account, cgroups, working dir and environment), and returns
        how it ended with its whole output (docs/exec.md). `stdin` is written
        to the command and then closed (None: it reads /dev/null). Only the
        job's owner or an admin may; a task not running raises ServerError
        (FAILED_PRECONDITION), an unknown one NotFoundError."""
        name = _job_name(job)
        if not command or not command[0]:
            raise errors.InvalidArgument("INVALID_ARGUMENT", "command: must be given (the program to run in the task)")
        if index < 0:
            raise errors.InvalidArgument("INVALID_ARGUMENT", f"index: must be >= 0, got {index}")
        start = service_pb2.ExecStart(job=name, role=role, index=index, command=list(command),
                                      stdin=stdin is not None)

        def requests() -> Iterator[service_pb2.ExecRequest]:
            yield service_pb2.ExecRequest(start=start)
            if stdin is None:
                return
            for at in range(0, len(stdin), 64 << 10):
                yield service_pb2.ExecRequest(stdin=stdin[at:at + (64 << 10)])
            yield service_pb2.ExecRequest(stdin_eof=True)

        node, attempt, out, err = "", 0, [], []
        end: Optional[service_pb2.ExecResponse] = None
        stream = self._stub.Exec(requests(), timeout=timeout, metadata=self._metadata)
        try:
            for r in stream:
                if r.node:
                    node, attempt = r.node, r.attempt
                out.append(r.stdout)
                err.append(r.stderr)
                if r.exited:
                    end = r
        except grpc.RpcError as e:
            raise self._error(e, f"exec {name} {role}/{index}") from None
        if end is None:
            raise errors.ServerError("UNAVAILABLE", "the stream ended before the command did",
                                     f"exec {name} {role}/{index}")
        return ExecResult(node=node, attempt=attempt, exit_code=end.exit_code, signal=end.signal,
                          stdout=b"".join(out), stderr=b"".join(err), message=end.message)

    # ---- logs ----

    def logs(self, job: "str | Job", role: str = "", index: int = -1, *, attempt: int = -1,
             follow: bool = False, tail_lines: Optional[int] = None) -> Iterator[LogLine]:
        """The lines the job's tasks wrote, stdout and stderr, as the server sends them.

        Args:
            role: only this role's tasks ("" = every task).
            index: only this index of the role (-1 = every index).
            attempt: which attempt (-1 = the latest).
            follow: keep streaming as the tasks write, across restarts, until
                the job has ended and every last attempt was read.
            tail_lines: only the last this many lines of each output.

        Lines of one output of one task come in order; outputs may interleave.
        A task whose log cannot be read raises ServerError at the end, after
        the other tasks' lines.
        """
        name = _job_name(job)
        if index < -1:
            raise errors.InvalidArgument("INVALID_ARGUMENT", f"index: must be >= 0 (or -1 for all), got {index}")
        if index >= 0 and not role:
            raise errors.InvalidArgument("INVALID_ARGUMENT", "index: needs a role")
        if tail_lines is not None and tail_lines < 0:
            raise errors.InvalidArgument("INVALID_ARGUMENT", f"tail_lines: must be >= 0, got {tail_lines}")
        request = service_pb2.LogsRequest(job=name, role=role, index=index, attempt=attempt, follow=follow)
        if tail_lines is not None:
            request.tail_lines = tail_lines
        stream = self._stub.Logs(request, metadata=self._metadata)
        outputs: dict[tuple[str, int, bool], LineAssembler] = {}
        failures: list[str] = []

        def line(key: tuple[str, int, bool], raw: str) -> LogLine:
            nanos, text = split_stamp(raw)
            return LogLine(task=key[0], attempt=key[1], stderr=key[2], text=text, unix_nanos=nanos)

        try:
            for chunk in stream:
                if chunk.error:
                    failures.append(f"{chunk.task}: {chunk.error}")
                    continue
                key = (chunk.task, chunk.attempt, chunk.stderr)
                assembler = outputs.setdefault(key, LineAssembler())
                for raw in assembler.add(chunk.data):
                    yield line(key, raw)
                if chunk.output_end:
                    rest = outputs.pop(key).finish()
                    if rest is not None:
                        yield line(key, rest)
        except grpc.RpcError as e:
            raise self._error(e, f"logs {name}") from None
        finally:
            stream.cancel()
        for key, assembler in outputs.items():
            rest = assembler.finish()
            if rest is not None:
                yield line(key, rest)
        if failures:
            raise errors.ServerError("UNAVAILABLE", "; ".join(failures), f"logs {name}")

    def log_text(self, job: "str | Job", role: str = "", index: int = -1, *,
                 stderr: bool = False, attempt: int = -1, follow: bool = False) -> str:
        """One text of the tasks' standard output (standard error with
        stderr=True), lines ordered by the time they were written, each
        ending in a newline. With follow=True it is the whole output: it
        returns once the job has ended and the tasks' last attempts were
        read to their end (a job ends as its deciding task does; the others
        may still be writing until they are stopped)."""
        lines: Iterable[LogLine] = self.logs(job, role, index, attempt=attempt, follow=follow)
        chosen = sorted((l for l in lines if l.stderr == stderr), key=lambda l: l.unix_nanos)
        return "".join(l.text + "\n" for l in chosen)
