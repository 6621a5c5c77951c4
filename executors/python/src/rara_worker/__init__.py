"""rara_worker: serve Python capabilities to rara over the ``rara.v1`` gRPC contract.

# Layout

- ``capability``: the registry and the ``@registry.capability(...)`` decorator.
- ``context``: what a handler receives (ids, deadline, progress, artifacts, cancellation).
- ``errors``: the exceptions handlers raise and how any exception becomes a structured error.
- ``events``: builds one attempt's events and guarantees their order.
- ``log``: one attempt's numbered events, kept for the stream attached to it (bounded).
- ``attempt``: runs one attempt (handler, deadline, cancel, supersede).
- ``attempts``: the attempts this executor knows (``Cancel``/``Attach`` lookup, one
  attempt per step, retention of finished detachable ones).
- ``attach``: the rules of ``Attach`` (ids, fence, sequence) and their gRPC statuses.
- ``server``: the gRPC ``ExecutorService`` and ``serve()`` (health, signals, shutdown).
- ``examples``: built-in capabilities (``text.stats``, ``dataset.split``, ``sleep``).
- ``conformance``: the capabilities rara's conformance suite drives (``--conformance``).
- ``__main__``: ``python -m rara_worker --port PORT``.
"""

from rara_worker.capability import Capability, CapabilityRegistry, DuplicateCapabilityError
from rara_worker.context import Context
from rara_worker.errors import InvalidInputError, PermanentError, RetryableError, StepError

__all__ = [
    "Capability",
    "CapabilityRegistry",
    "Context",
    "DuplicateCapabilityError",
    "InvalidInputError",
    "PermanentError",
    "RetryableError",
    "StepError",
]
