"""rara from Python: a client of rara's HTTP API (sync :class:`Client`, async
:class:`AsyncClient`) and workflows defined in code (:class:`Workflow`).

.. code-block:: python

    from rara_client import Client, Workflow, Input

    wf = Workflow("rebuild-index", inputs={"text": Input(str)})
    split = wf.step("split", "text.split", input={"text": wf.input("/text")})
    with Client("http://127.0.0.1:7878", token="...") as rara:
        run = rara.submit(wf, {"text": "a b c"})
        for change in rara.watch(run["id"]):
            print(change)
"""

from . import errors, types
from ._http import Retry, SigV4
from .aio import AsyncClient
from .client import Client
from .errors import (
    ApiError,
    BadRequestError,
    ConflictError,
    ConnectionFailedError,
    ForbiddenError,
    InternalError,
    InvalidPayloadError,
    InvalidWorkflowError,
    MisdirectedError,
    NotFoundError,
    NotWaitingError,
    PayloadTooLargeError,
    RaraError,
    RerunRefusedError,
    SecretNotGrantedError,
    TooManyError,
    UnauthorizedError,
    UnavailableError,
    UnexpectedResponseError,
    UnsupportedMediaTypeError,
    WatchError,
)
from .watch import RunFinished, StepChange, WatchEvent
from .workflow import Input, Ref, StepRef, Workflow, item

__all__ = [
    "ApiError",
    "AsyncClient",
    "BadRequestError",
    "Client",
    "ConflictError",
    "ConnectionFailedError",
    "ForbiddenError",
    "Input",
    "InternalError",
    "InvalidPayloadError",
    "InvalidWorkflowError",
    "MisdirectedError",
    "NotFoundError",
    "NotWaitingError",
    "PayloadTooLargeError",
    "RaraError",
    "Ref",
    "RerunRefusedError",
    "Retry",
    "RunFinished",
    "SecretNotGrantedError",
    "SigV4",
    "StepChange",
    "StepRef",
    "TooManyError",
    "UnauthorizedError",
    "UnavailableError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "WatchError",
    "WatchEvent",
    "Workflow",
    "errors",
    "item",
    "types",
]
