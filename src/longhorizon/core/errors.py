"""Errors that cross layers."""


class InfraError(RuntimeError):
    """Something outside the agent's control failed (model server down, World build crashed).

    Recorded apart from agent failures and retried when a run is resumed.
    """


class UsageError(ValueError):
    """Bad input from a user of the CLI or API (unknown task, missing folder): one-line message, exit 2."""


class ContextLengthExceeded(RuntimeError):
    """The conversation no longer fits the model's context window.

    The agent's own outcome, not an infrastructure failure (retrying cannot help): the
    episode ends with status ``context_length`` and is graded as it stands.
    """
