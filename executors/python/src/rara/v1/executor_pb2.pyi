import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetCapabilitiesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCapabilitiesResponse(_message.Message):
    __slots__ = ("capabilities",)
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    capabilities: _containers.RepeatedCompositeFieldContainer[Capability]
    def __init__(self, capabilities: _Optional[_Iterable[_Union[Capability, _Mapping]]] = ...) -> None: ...

class Capability(_message.Message):
    __slots__ = ("name", "version", "description", "input_schema", "detachable")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    DETACHABLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    description: str
    input_schema: str
    detachable: bool
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[str] = ..., detachable: _Optional[bool] = ...) -> None: ...

class ExecuteRequest(_message.Message):
    __slots__ = ("run_id", "step_id", "attempt", "fence", "operation", "capability_version", "input_json", "map_index", "deadline", "heartbeat_interval_ms", "trace_context", "detachable", "attempt_secret", "prior_attempt_secrets")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    MAP_INDEX_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    DETACHABLE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_SECRET_FIELD_NUMBER: _ClassVar[int]
    PRIOR_ATTEMPT_SECRETS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    step_id: str
    attempt: int
    fence: int
    operation: str
    capability_version: str
    input_json: str
    map_index: int
    deadline: _timestamp_pb2.Timestamp
    heartbeat_interval_ms: int
    trace_context: _containers.ScalarMap[str, str]
    detachable: bool
    attempt_secret: str
    prior_attempt_secrets: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_id: _Optional[str] = ..., step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., fence: _Optional[int] = ..., operation: _Optional[str] = ..., capability_version: _Optional[str] = ..., input_json: _Optional[str] = ..., map_index: _Optional[int] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., heartbeat_interval_ms: _Optional[int] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., detachable: _Optional[bool] = ..., attempt_secret: _Optional[str] = ..., prior_attempt_secrets: _Optional[_Iterable[str]] = ...) -> None: ...

class AttachRequest(_message.Message):
    __slots__ = ("step_id", "attempt", "fence", "after_sequence", "heartbeat_interval_ms", "trace_context", "attempt_secret")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_SECRET_FIELD_NUMBER: _ClassVar[int]
    step_id: str
    attempt: int
    fence: int
    after_sequence: int
    heartbeat_interval_ms: int
    trace_context: _containers.ScalarMap[str, str]
    attempt_secret: str
    def __init__(self, step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., fence: _Optional[int] = ..., after_sequence: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., attempt_secret: _Optional[str] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("sequence", "timestamp", "accepted", "running", "progress", "artifact", "heartbeat", "succeeded", "failed", "cancelled")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    timestamp: _timestamp_pb2.Timestamp
    accepted: Accepted
    running: Running
    progress: Progress
    artifact: Artifact
    heartbeat: Heartbeat
    succeeded: Succeeded
    failed: Failed
    cancelled: Cancelled
    def __init__(self, sequence: _Optional[int] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., accepted: _Optional[_Union[Accepted, _Mapping]] = ..., running: _Optional[_Union[Running, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., artifact: _Optional[_Union[Artifact, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., succeeded: _Optional[_Union[Succeeded, _Mapping]] = ..., failed: _Optional[_Union[Failed, _Mapping]] = ..., cancelled: _Optional[_Union[Cancelled, _Mapping]] = ...) -> None: ...

class Accepted(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Running(_message.Message):
    __slots__ = ("capability_version",)
    CAPABILITY_VERSION_FIELD_NUMBER: _ClassVar[int]
    capability_version: str
    def __init__(self, capability_version: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("fraction", "message")
    FRACTION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    fraction: float
    message: str
    def __init__(self, fraction: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class Artifact(_message.Message):
    __slots__ = ("name", "uri", "media_type", "size_bytes", "digest")
    NAME_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    name: str
    uri: str
    media_type: str
    size_bytes: int
    digest: str
    def __init__(self, name: _Optional[str] = ..., uri: _Optional[str] = ..., media_type: _Optional[str] = ..., size_bytes: _Optional[int] = ..., digest: _Optional[str] = ...) -> None: ...

class Succeeded(_message.Message):
    __slots__ = ("output_json", "artifacts")
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    output_json: str
    artifacts: _containers.RepeatedCompositeFieldContainer[Artifact]
    def __init__(self, output_json: _Optional[str] = ..., artifacts: _Optional[_Iterable[_Union[Artifact, _Mapping]]] = ...) -> None: ...

class Failed(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: Error
    def __init__(self, error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class Cancelled(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message", "retryable", "details")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    retryable: bool
    details: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., retryable: _Optional[bool] = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("step_id", "attempt", "reason", "attempt_secret")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_SECRET_FIELD_NUMBER: _ClassVar[int]
    step_id: str
    attempt: int
    reason: str
    attempt_secret: str
    def __init__(self, step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ..., attempt_secret: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("found",)
    FOUND_FIELD_NUMBER: _ClassVar[int]
    found: bool
    def __init__(self, found: _Optional[bool] = ...) -> None: ...
