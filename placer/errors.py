"""placer's own error hierarchy.

Why its own: users see these errors, not library tracebacks, so each one names the thing that is
wrong (file, object, field or jq path) and says what to do next (``hint``). Errors that come from
a Kubernetes API server keep the server's Status (``code``, ``reason``, ``message``) so callers can
decide by reason and users can read the server's own words. An unreachable cluster is its own
class so that placement can skip that cluster and carry on with the others.

The tree::

    PlacerError
    ├── UsageError                  bad command line (exit 2)
    ├── InputError                  a file or object the user gave is malformed
    │   ├── MalformedYamlError      the text is not YAML at all (exit 2)
    │   ├── SnapshotError           capacity snapshot file
    │   ├── FleetConfigError        kubeconfig / context / fleet file
    │   ├── PolicyError             PlacementPolicy document
    │   └── QueueError              Queue or PriorityClass document, or a set of queues
    ├── DefinitionError             a Workload Map (Karta) definition is unusable
    │   ├── DefinitionInvalidError       validation found problems (all listed)
    │   └── JqError                 a jq expression failed: parse, runtime, time or output limit
    ├── NoDefinitionError           no definition covers an object's kind (exit 4)
    ├── UnknownTypeError            a TYPE argument names no kind of the catalog (exit 4)
    ├── WorkloadNotFoundError       TYPE/NAME exists on no reachable member cluster (exit 3)
    ├── FleetUnreachableError       no cluster of the fleet could be reached (exit 3)
    ├── InterpretationError         a manifest does not fit its definition (names the jq path)
    └── KubeError                   an API server answered with an error Status, or not at all
        ├── ClusterUnreachableError connection refused, TLS failure, timeout
        ├── UnauthorizedError       401
        ├── ForbiddenError          403
        ├── NotFoundError           404
        ├── ConflictError           409 (AlreadyExists or Conflict)
        ├── GoneError               410 (Expired / Gone: re-list)
        ├── InvalidError            422 (with the Status causes)
        ├── TooManyRequestsError    429
        └── ServerError             5xx
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "EXIT_CODES",
    "EXIT_ERROR",
    "EXIT_NOT_FOUND",
    "EXIT_NO_DEFINITION",
    "EXIT_OK",
    "EXIT_USAGE",
    "ClusterUnreachableError",
    "ConflictError",
    "DefinitionError",
    "DefinitionInvalidError",
    "FleetConfigError",
    "FleetUnreachableError",
    "ForbiddenError",
    "GoneError",
    "InputError",
    "InterpretationError",
    "InvalidError",
    "JqError",
    "KubeError",
    "MalformedYamlError",
    "NoDefinitionError",
    "NotFoundError",
    "PlacerError",
    "PolicyError",
    "QueueError",
    "ServerError",
    "SnapshotError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnknownTypeError",
    "UsageError",
    "WorkloadNotFoundError",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_NO_DEFINITION = 4

#: Every command's exit codes, the one table ``placer --help`` and docs/operations.md show.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "all done: every workload placed (submitted, settled), every object found"),
    (
        EXIT_ERROR,
        "not all done: some workload not placed, failed to dispatch or failed while waited "
        "for; an invalid definition; an error a cluster answered; a malformed file",
    ),
    (EXIT_USAGE, "usage: a wrong command line, or input that is not YAML"),
    (
        EXIT_NOT_FOUND,
        "nothing reachable or not found: no cluster of the fleet answered, or TYPE/NAME is on "
        "no reachable cluster",
    ),
    (EXIT_NO_DEFINITION, "no definition: no workload definition covers a kind, type or name"),
)


class PlacerError(Exception):
    """Base of every error placer raises on purpose.

    ``message`` says what is wrong; ``hint`` (optional) says what to do next. ``str(err)`` joins
    both, so a CLI can print ``error: <str(err)>`` and be done.
    """

    exit_code: int = EXIT_ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  To fix: {self.hint}"
        return self.message


class UsageError(PlacerError):
    """The command line is wrong (unknown flag, missing argument, bad combination)."""

    exit_code = EXIT_USAGE


class InputError(PlacerError):
    """A file or object given by the user is malformed.

    ``source`` names the file (or ``-`` for stdin, or an object reference); ``field`` names the
    field path inside it when known.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if source and field:
            where = f"{source}: {field}: "
        elif source:
            where = f"{source}: "
        elif field:
            where = f"{field}: "
        super().__init__(where + message, hint=hint)
        self.source = source
        self.field = field


class MalformedYamlError(InputError):
    """The text is not YAML at all; exit code 2, as for other unusable command input."""

    exit_code = EXIT_USAGE


class SnapshotError(InputError):
    """A capacity snapshot file is malformed."""


class FleetConfigError(InputError):
    """A kubeconfig, context or fleet file is missing or malformed."""


class PolicyError(InputError):
    """A PlacementPolicy document is malformed or contradictory."""


class QueueError(InputError):
    """A Queue or PriorityClass document is malformed, or the queues contradict each other."""


class DefinitionError(PlacerError):
    """A Workload Map (Karta) definition cannot be used."""


class DefinitionInvalidError(DefinitionError):
    """Validation found one or more problems; ``problems`` lists every one of them."""

    def __init__(self, definition: str, problems: Sequence[str], *, source: str | None = None):
        self.definition = definition
        self.problems = tuple(problems)
        self.source = source
        where = f"{source}: " if source else ""
        lines = "\n".join(f"  {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(
            f"{where}definition {definition!r} is invalid ({count} problem(s)):\n{lines}"
        )


class JqError(DefinitionError):
    """A jq expression failed to parse, failed at run time, ran too long or produced too much.

    ``expression`` is the jq text; ``location`` names where it lives (definition, component and
    field), when the caller knows.
    """

    def __init__(
        self, message: str, *, expression: str, location: str | None = None, hint: str | None = None
    ) -> None:
        where = f"{location}: " if location else ""
        super().__init__(f"{where}jq {expression!r}: {message}", hint=hint)
        self.expression = expression
        self.location = location


#: the kinds of Workload Map definitions themselves (placer.definitions.loader reads them).
_DEFINITION_KINDS = (
    ("run.ai/v1alpha1", "Karta"),
    ("optimization.nvidia.com/v1alpha1", "ResourceInterface"),
)


class NoDefinitionError(PlacerError):
    """No definition covers an object's group/version/kind."""

    exit_code = EXIT_NO_DEFINITION

    def __init__(self, api_version: str, kind: str, *, source: str | None = None) -> None:
        where = f"{source}: " if source else ""
        if (api_version, kind) in _DEFINITION_KINDS:  # a definition given as a workload
            hint = (
                "this is a Workload Map definition, not a workload: check it with `placer "
                "validate FILE` and pass its directory with --catalog DIR"
            )
        else:
            hint = (
                "add a Workload Map (Karta) definition whose rootComponent.kind is "
                f"{api_version} {kind} to a directory and pass it with --catalog DIR "
                "(see `placer definitions` for the built-in ones)"
            )
        super().__init__(f"{where}no workload definition covers {api_version} {kind}", hint=hint)
        self.api_version = api_version
        self.kind = kind


class UnknownTypeError(PlacerError):
    """A type token names no kind of the catalog (exit 4, like a kind no definition covers)."""

    exit_code = EXIT_NO_DEFINITION


class WorkloadNotFoundError(PlacerError):
    """The named workload exists on no reachable member cluster (exit 3, as kubectl-karta)."""

    exit_code = EXIT_NOT_FOUND


class FleetUnreachableError(PlacerError):
    """No cluster of the fleet could be reached, so nothing could be read or decided (exit 3)."""

    exit_code = EXIT_NOT_FOUND


class InterpretationError(PlacerError):
    """A manifest could not be interpreted with its definition (wrong type, count or field)."""


class KubeError(PlacerError):
    """An API server answered with an error Status, or could not be reached.

    Keeps the Status: ``code`` (HTTP status, 0 when no answer came), ``reason`` (e.g.
    ``NotFound``, ``Invalid``), the server's ``status_message`` and ``details``; ``cluster`` names
    the member cluster (context) the request went to.
    """

    def __init__(
        self,
        message: str,
        *,
        cluster: str | None = None,
        code: int = 0,
        reason: str = "",
        status_message: str = "",
        details: Mapping[str, Any] | None = None,
        hint: str | None = None,
    ) -> None:
        where = f"cluster {cluster}: " if cluster else ""
        super().__init__(where + message, hint=hint)
        self.cluster = cluster
        self.code = code
        self.reason = reason
        self.status_message = status_message
        self.details: Mapping[str, Any] = details or {}


class ClusterUnreachableError(KubeError):
    """No answer: connection refused, DNS, TLS verification failure or timeout."""


class UnauthorizedError(KubeError):
    """401: the credentials were not accepted."""


class ForbiddenError(KubeError):
    """403: the credentials are valid but not allowed to do this."""


class NotFoundError(KubeError):
    """404: the object (or namespace, or resource type) does not exist."""


class ConflictError(KubeError):
    """409: the object already exists, or was changed meanwhile."""


class GoneError(KubeError):
    """410: the resourceVersion or continue token is too old; list again."""


class InvalidError(KubeError):
    """422: the server rejected the object; ``details['causes']`` says which fields."""


class TooManyRequestsError(KubeError):
    """429: the server asks to slow down."""


class ServerError(KubeError):
    """5xx: the server failed."""
