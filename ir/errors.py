"""The one exception type a user can cause, shared by every package of the project."""


class DmlLowerError(Exception):
    """A user-facing error: bad model, bad feed, unsupported level, a limit exceeded.

    The message is one line naming the node, input, type or limit involved; the CLI prints
    it and exits 2.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def first_line(exc: BaseException) -> str:
    """The first non-blank line of a third-party exception's message (or its type's name)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


class ModelContradiction(DmlLowerError):
    """The model's declarations contradict what it computes (a value_info shape the values do not
    have): the model's fault, not a backend's, so `check` refuses the model (exit 2) instead of
    reporting one backend's ERROR."""
