"""The exceptions of the Trainyard SDK.

Every error the SDK raises is a TrainyardError. Input that is wrong (a spec, an
argument, the task's environment) raises a subclass of ValueError as well, and
its message names the field at fault.
"""
from __future__ import annotations

from typing import Sequence


class TrainyardError(Exception):
    """Base of every error of the SDK."""


class ConfigError(TrainyardError, ValueError):
    """The client config (file or environment) cannot be used."""


class SpecError(TrainyardError, ValueError):
    """A job spec is wrong; `problems` holds one "path: problem" line each.

    Raised for a spec that is not a mapping or not YAML here, and for the
    problems the server found (it checks every field and names each).
    """

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("invalid job spec:\n  " + "\n  ".join(self.problems))


class ServerError(TrainyardError):
    """The server refused or failed a call.

    Attributes:
        code: the gRPC status code's name ("NOT_FOUND", "PERMISSION_DENIED", ...).
        details: the server's message.
    """

    def __init__(self, code: str, details: str, what: str = ""):
        self.code = code
        self.details = details
        super().__init__(f"{what}: {details} ({code})" if what else f"{details} ({code})")


class InvalidArgument(ServerError, ValueError):
    """An argument is wrong; the message names it."""


class NotFoundError(ServerError, LookupError):
    """The job (or task) named does not exist."""


class Unavailable(ServerError):
    """The server cannot be reached (not running, wrong address, or TLS)."""


class JobMasterError(TrainyardError):
    """The job master refused a worker's request or could not be reached.

    Attributes:
        code: the absl status code's name the master answered with
            ("DEADLINE_EXCEEDED", "ABORTED", ...), or "UNAVAILABLE".
    """

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(f"{message} ({code})")


class TaskEnvironmentError(TrainyardError, ValueError):
    """A TRAINYARD_* variable of the task is missing or malformed; the message names it."""


class WaitTimeout(TrainyardError, TimeoutError):
    """A watch or wait ran past its timeout; the job goes on."""
