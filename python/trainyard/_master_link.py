"""A worker's connection to its job master: frames, pings, calls, reconnection.

The wire (docs/jobmaster.md, "Wire"): plain TCP, each frame a 4-byte
big-endian length then one JobMasterRequest (to the master) or
JobMasterResponse (back), matched by request_id. As the C++ worker library
(src/jobmaster/client/job_master_client.h) does, the link registers with
STARTING, pings from its own thread, and when the master goes away (it
crashed and is restarted, perhaps elsewhere: the master file says where) it
reconnects and registers again with the same id and the state it had
reached; barriers in flight are entered again on the new connection (by
their generation), other calls fail with UNAVAILABLE and may be retried.
"""
from __future__ import annotations

import select
import socket
import struct
import threading
import time
from typing import Callable, Optional

from trainyard._pb import jobmaster_pb2, trainyard_pb2
from trainyard.errors import JobMasterError

# absl::StatusCode numbering, which ErrorReply.code uses.
_ABSL_CODES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
               "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
               "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
               "UNAUTHENTICATED")
_MAX_RESPONSE_BYTES = 256 << 20  # as jobmaster/frame.h's kMaxResponseBytes
# How much longer than a call's own timeout to wait for the master's answer
# (it answers DEADLINE_EXCEEDED itself at the timeout).
_REPLY_GRACE = 5.0
_MAX_BACKOFF = 1.0


def split_host_port(address: str) -> Optional[tuple[str, int]]:
    """(host, port) of "host:port" or "[v6]:port"; None when it is not one."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        return None
    return host.strip("[]"), int(port)


def _frame(message: jobmaster_pb2.JobMasterRequest) -> bytes:
    payload: bytes = message.SerializeToString()
    return struct.pack(">I", len(payload)) + payload


def _error_of(response: jobmaster_pb2.JobMasterResponse) -> Optional[JobMasterError]:
    if response.WhichOneof("body") != "error":
        return None
    code = response.error.code
    name = _ABSL_CODES[code] if 0 <= code < len(_ABSL_CODES) else str(code)
    return JobMasterError(name, response.error.message)


class _Call:
    def __init__(self, request: jobmaster_pb2.JobMasterRequest):
        self.request = request
        self.done = threading.Event()
        self.response: Optional[jobmaster_pb2.JobMasterResponse] = None
        self.error: Optional[JobMasterError] = None

    def finish(self, response: Optional[jobmaster_pb2.JobMasterResponse],
               error: Optional[JobMasterError]) -> None:
        self.response, self.error = response, error
        self.done.set()

    @property
    def resendable(self) -> bool:
        return bool(self.request.WhichOneof("body") == "barrier")


class MasterLink:
    """One worker's registered connection to the job master.

    `master_address` is called at each (re)connection for the address to
    reach. `starting` is the registration; the link re-registers with it
    (its worker id set to the one the master gave) after a reconnection.
    REQUIRES: ping_interval, connect_timeout and reconnect_window > 0.
    """

    def __init__(self, master_address: Callable[[], str], starting: jobmaster_pb2.Starting, *,
                 ping_interval: float, connect_timeout: float, reconnect_window: float):
        self._address = master_address
        self._starting = starting
        self._ping_interval = ping_interval
        self._reconnect_window = reconnect_window
        self._lock = threading.Lock()  # guards what follows, not the socket's writes
        self._send_lock = threading.Lock()
        self._calls: dict[int, _Call] = {}
        self._next_id = 1
        self._closed = False
        self._lost: Optional[JobMasterError] = None
        self._connected = False
        self._state = "UNASSIGNED"  # the last state the master accepted (a WorkerState's name)
        self._reason = ""
        # The job's order to checkpoint as the master last pushed or answered it.
        self._order = trainyard_pb2.CheckpointOrder()
        self._leftover = b""  # bytes read past a registration's answer
        deadline = time.monotonic() + connect_timeout
        self._sock = self._connect(deadline)
        try:
            self.registered = self._register(self._sock, starting, deadline)
        except (JobMasterError, OSError) as e:
            self._sock.close()
            if isinstance(e, JobMasterError):
                raise
            raise JobMasterError("UNAVAILABLE", f"registration: {e}") from None
        self._starting.info.worker_id = self.registered.worker_id
        self._connected = True
        self._reader = threading.Thread(target=self._run, name="trainyard-jobmaster", daemon=True)
        self._reader.start()

    # ---- connecting and registering ----

    def _connect(self, deadline: float) -> socket.socket:
        delay = 0.05
        while True:
            address = self._address()
            target = split_host_port(address)
            if target is None:
                raise JobMasterError("INVALID_ARGUMENT", f"the job master's address '{address}' is not host:port")
            try:
                sock = socket.create_connection(target, timeout=max(0.1, deadline - time.monotonic()))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            except OSError as e:
                if time.monotonic() + delay > deadline:
                    raise JobMasterError("UNAVAILABLE", f"cannot reach the job master at {address}: "
                                         f"{e.strerror or e}") from None
                time.sleep(delay)  # backoff between attempts, bounded by the deadline
                delay = min(delay * 2, _MAX_BACKOFF)

    def _register(self, sock: socket.socket, starting: jobmaster_pb2.Starting,
                  deadline: float) -> jobmaster_pb2.RegisterReply:
        """Sends STARTING on a fresh connection and reads its answer (the
        first frame: nothing else is asked on it yet)."""
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        with self._lock:
            request_id = self._next_id
            self._next_id += 1
        sock.sendall(_frame(jobmaster_pb2.JobMasterRequest(request_id=request_id, starting=starting)))
        buffer = b""
        while len(buffer) < 4 or len(buffer) < 4 + struct.unpack(">I", buffer[:4])[0]:
            data = sock.recv(1 << 16)
            if not data:
                raise JobMasterError("UNAVAILABLE", "registration: the job master closed the connection")
            buffer += data
        size = struct.unpack(">I", buffer[:4])[0]
        response = jobmaster_pb2.JobMasterResponse.FromString(buffer[4:4 + size])
        sock.settimeout(None)
        error = _error_of(response)
        if error is not None:
            raise JobMasterError(error.code, f"registration: {error.args[0]}")
        # What followed the answer (an order to checkpoint the master pushes
        # to a worker that rejoins while one is open) is the reader's.
        with self._lock:
            self._leftover = buffer[4 + size:]
        reply: jobmaster_pb2.RegisterReply = response.registered
        return reply

    def _reconnect(self) -> Optional[socket.socket]:
        """A new registered connection within the reconnect window; None when
        the master did not come back or the link was closed."""
        deadline = time.monotonic() + self._reconnect_window
        while not self._is_closed():
            try:
                sock = self._connect(deadline)
            except JobMasterError:
                return None
            with self._lock:
                starting = jobmaster_pb2.Starting()
                starting.CopyFrom(self._starting)
                starting.MergeFrom(jobmaster_pb2.Starting(resume_state=self._state, resume_reason=self._reason))
            try:
                self._register(sock, starting, deadline)
                return sock
            except (JobMasterError, OSError):
                sock.close()
                if time.monotonic() >= deadline:
                    return None
                time.sleep(min(_MAX_BACKOFF, max(0.0, deadline - time.monotonic())))
        return None

    # ---- the reader thread ----

    def _run(self) -> None:
        sock = self._sock
        while True:
            why = self._serve(sock)
            if self._is_closed():
                self._fail_all(JobMasterError("UNAVAILABLE", "the worker was closed"))
                return
            self._disconnected(why)
            sock_or_none = self._reconnect()
            if sock_or_none is None:
                self._fail_all(JobMasterError("UNAVAILABLE", f"{why}; it did not come back within "
                                              f"{self._reconnect_window:g}s"))
                return
            sock = sock_or_none
            self._reconnected(sock)

    def _serve(self, sock: socket.socket) -> str:
        """Reads answers and pings until the connection ends; returns why."""
        with self._lock:
            buffer, self._leftover = self._leftover, b""
        next_ping = time.monotonic() + self._ping_interval
        try:
            buffer, why = self._dispatch_frames(buffer)  # what the registration read past its answer
            if why:
                return why
            while True:
                readable, _, _ = select.select([sock], [], [], max(0.0, next_ping - time.monotonic()))
                if time.monotonic() >= next_ping:
                    with self._send_lock:
                        sock.sendall(_frame(jobmaster_pb2.JobMasterRequest(ping=jobmaster_pb2.Ping())))
                    next_ping = time.monotonic() + self._ping_interval
                if not readable:
                    continue
                data = sock.recv(1 << 16)
                if not data:
                    return "the job master closed the connection"
                buffer, why = self._dispatch_frames(buffer + data)
                if why:
                    return why
        except (OSError, ValueError) as e:
            return f"the connection to the job master failed: {e}"

    def _dispatch_frames(self, buffer: bytes) -> tuple[bytes, str]:
        """Dispatches the whole frames at the front of `buffer`; returns the
        rest and, when the stream is broken, why."""
        while len(buffer) >= 4:
            (size,) = struct.unpack(">I", buffer[:4])
            if size > _MAX_RESPONSE_BYTES:
                return buffer, f"the job master sent a frame of {size} bytes"
            if len(buffer) < 4 + size:
                break
            self._dispatch(jobmaster_pb2.JobMasterResponse.FromString(buffer[4:4 + size]))
            buffer = buffer[4 + size:]
        return buffer, ""

    def _dispatch(self, response: jobmaster_pb2.JobMasterResponse) -> None:
        if response.WhichOneof("body") == "checkpoint":
            self.take_order(response.checkpoint)  # pushed, or the answer to a poll
            if response.request_id == 0:
                return
        with self._lock:
            call = self._calls.pop(response.request_id, None)
        if call is not None:  # else: an answer nobody waits for (a refused ping)
            error = _error_of(response)
            call.finish(None if error else response, error)

    def _disconnected(self, why: str) -> None:
        """Fails the calls in flight but barriers, which wait for the next connection."""
        with self._lock:
            self._connected = False
            failed = [c for c in self._calls.values() if not c.resendable]
            for call in failed:
                self._calls.pop(call.request.request_id)
        for call in failed:
            call.finish(None, JobMasterError("UNAVAILABLE", f"{why} (it may be retried)"))

    def _reconnected(self, sock: socket.socket) -> None:
        with self._send_lock:
            old, self._sock = self._sock, sock
        old.close()
        with self._lock:
            self._connected = True
            waiting = list(self._calls.values())
        for call in waiting:  # barriers, entered again by their generation
            self._send(call.request)

    def _fail_all(self, error: JobMasterError) -> None:
        with self._lock:
            self._lost = error
            self._connected = False
            calls, self._calls = self._calls, {}
        for call in calls.values():
            call.finish(None, error)

    def _is_closed(self) -> bool:
        with self._lock:
            return self._closed

    # ---- calls ----

    def _send(self, request: jobmaster_pb2.JobMasterRequest) -> None:
        """Sends; a failure is the reader's to notice (it fails or resends the call)."""
        try:
            with self._send_lock:
                self._sock.sendall(_frame(request))
        except OSError:
            pass  # the reader sees the connection end and handles the call in flight

    def call(self, request: jobmaster_pb2.JobMasterRequest, timeout: Optional[float],
             what: str) -> jobmaster_pb2.JobMasterResponse:
        """Sends `request` and waits for its answer, up to `timeout` seconds
        and a grace (None: until it comes or the link is lost). Raises
        JobMasterError with the master's code, or UNAVAILABLE."""
        call = _Call(request)
        with self._lock:
            if self._lost is not None:
                raise JobMasterError(self._lost.code, f"{what}: {self._lost.args[0]}")
            if not self._connected and not call.resendable:
                raise JobMasterError("UNAVAILABLE", f"{what}: the job master went away; reconnecting")
            request.request_id = self._next_id
            self._next_id += 1
            self._calls[request.request_id] = call
            send_now = self._connected
        if send_now:
            self._send(request)
        if not call.done.wait(None if timeout is None else timeout + _REPLY_GRACE):
            with self._lock:
                self._calls.pop(request.request_id, None)
            raise JobMasterError("DEADLINE_EXCEEDED", f"{what}: the job master did not answer in {timeout}s")
        if call.error is not None:
            raise JobMasterError(call.error.code, f"{what}: {call.error.args[0]}")
        assert call.response is not None
        return call.response

    def state_accepted(self, state: str, reason: str) -> None:
        """Records the state the master accepted: a re-registration resumes it."""
        with self._lock:
            self._state, self._reason = state, reason

    def take_order(self, order: trainyard_pb2.CheckpointOrder) -> None:
        """Keeps `order` when it is newer than the one held."""
        with self._lock:
            if order.id > self._order.id:
                self._order = order

    def order(self) -> trainyard_pb2.CheckpointOrder:
        """The job's last order to checkpoint (id 0: none)."""
        with self._lock:
            return self._order

    def declare_checkpoints(self) -> None:
        """Tells the master this worker checkpoints: a poll now, whose answer
        (an order already open) the reader takes without anyone waiting (a
        master that predates checkpoints does not answer it), and
        registrations with `checkpoints` from now on."""
        with self._lock:
            self._starting.checkpoints = True
            if self._lost is not None or not self._connected:
                return  # the next registration says it
            request = jobmaster_pb2.JobMasterRequest(request_id=self._next_id,
                                                     checkpoint_poll=jobmaster_pb2.CheckpointPoll())
            self._next_id += 1
        self._send(request)

    def close(self) -> None:
        """Stops pinging and closes the connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with self._send_lock:
            sock = self._sock
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the master
        self._reader.join(timeout=5)
        sock.close()
