"""The one exception type a user can cause, shared by every package of the project."""


class DmlLowerError(Exception):
    """A user-facing error: bad model, bad feed, unsupported level, a limit exceeded.

    The message is one line naming the node, input, type or limit involved; the CLI prints
    it and exits 2.
    """

    def __init__(self, message: str) -> None:
        # One line, whatever names it carries: control characters escaped visibly (ir.display;
        # a name put in without !r would otherwise reach the terminal raw), whitespace runs one space.
        from .display import display_lines
        super().__init__(" ".join(display_lines(message).split()))


def first_line(exc: BaseException) -> str:
    """The first non-blank line of a third-party exception's message (or its type's name)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__
