"""Trainyard's Python SDK (docs/python-sdk.md).

Client side: Client submits, watches, waits for, lists, describes and kills
jobs and reads their logs, over the server's gRPC API, configured as the
`trainyard` CLI is. Worker side: Worker registers a training program with
its job master and offers barriers, discovery and the checkpoint callback.
"""
from trainyard.client import Client
from trainyard.config import ClientConfig, resolve_config
from trainyard.errors import (ConfigError, InvalidArgument, JobMasterError, NotFoundError, ServerError,
                              SpecError, TaskEnvironmentError, TrainyardError, Unavailable, WaitTimeout)
from trainyard.logs import LogLine
from trainyard.views import Account, ExecResult, Job, ResourceSample, Task, TaskResources, UsageRow
from trainyard.worker import CheckpointRequest, Worker, WorkerEnv, WorkerStatus

__all__ = ["Client", "ClientConfig", "resolve_config", "ConfigError", "InvalidArgument", "JobMasterError",
           "NotFoundError", "ServerError", "SpecError", "TaskEnvironmentError", "TrainyardError",
           "Unavailable", "WaitTimeout", "LogLine", "Account", "ExecResult", "Job", "ResourceSample", "Task", "TaskResources", "UsageRow", "CheckpointRequest", "Worker",
           "WorkerEnv", "WorkerStatus"]
