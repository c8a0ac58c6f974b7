"""The one exception type a user can cause, shared by every package of the project, and the one
way a third-party message becomes part of one of its lines (first_line, brief)."""
from __future__ import annotations

import re


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


# onnxruntime's C++ checks prefix their message with where they are in its sources:
# '/onnxruntime_src/.../reshape_helper.h:84 onnxruntime::ReshapeHelper::ReshapeHelper(const ...&, bool) '
# and, for ORT_ENFORCE, the failed expression ('size != 0 && ... was false. '). Neither means
# anything to a user; the message after them is the part that does.
_SOURCE_LOCATION = re.compile(r"(?:[A-Za-z]:)?[\w./\\+-]*\.(?:h|hh|hpp|c|cc|cpp|cxx|cu|mm):\d+ ")
_SIGNATURE = re.compile(r"[\w:~<>*&, ]*::[\w~<>]+(?:<[^()]*>)?\(")
_FAILED_CHECK = re.compile(r".*? was false\. (?=\S)")
# gcc's template arguments after a signature: 'LRN<T>::LRN(const OpKernelInfo&) [with T = float] '
_TEMPLATE_ARGUMENTS = re.compile(r"^\[with [^\]]*\]")

# The longest third-party text a message quotes (brief); a longer one keeps its start and its end.
BRIEF_LIMIT = 400


def _skip_signature(text: str) -> str:
    """`text` without a leading C++ function signature 'ns::Class::f(args) [const] '."""
    match = _SIGNATURE.match(text)
    if not match:
        return text
    depth, index = 0, match.end() - 1
    for index in range(match.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            break
    else:
        return text
    rest = text[index + 1:]
    rest = rest[len(" const"):] if rest.startswith(" const") else rest
    return _TEMPLATE_ARGUMENTS.sub("", rest.lstrip(), count=1).lstrip()


def strip_source_locations(text: str) -> str:
    """onnxruntime's (and other C++ libraries') source path, function signature (with gcc's
    '[with T = ...]') and failed expression dropped wherever they appear, the message after them
    kept; a failed expression nothing follows is the message (ORT_ENFORCE without one) and stays."""
    out, position = [], 0
    for match in _SOURCE_LOCATION.finditer(text):
        if match.start() < position:
            continue
        out.append(text[position:match.start()])
        rest = _skip_signature(text[match.end():])
        failed = _FAILED_CHECK.match(rest)
        rest = rest[failed.end():] if failed else rest
        position = len(text) - len(rest)
    out.append(text[position:])
    return "".join(out)


def brief(text: str, limit: int = BRIEF_LIMIT) -> str:
    """A third-party message as one line: whitespace collapsed, source locations dropped
    (strip_source_locations) and, past `limit` characters, its start and its end (where
    onnxruntime and most libraries say what went wrong) joined by ' ... ', cut between words."""
    text = " ".join(str(text).split())
    if len(text) > 8 * limit:       # only its ends can show: the pattern search stays short
        text = f"{text[:4 * limit]} {text[-4 * limit:]}"
    text = " ".join(strip_source_locations(text).split())
    if len(text) <= limit:
        return text
    keep = (limit - len(" ... ")) // 2
    head = text[:keep].rsplit(" ", 1)[0] if " " in text[:keep] else text[:keep]
    tail = text[-keep:].split(" ", 1)[1] if " " in text[-keep:] else text[-keep:]
    return f"{head} ... {tail}"


def first_line(exc: "BaseException | str") -> str:
    """The first non-blank line of a third-party exception's message (or its type's name),
    through brief (no source locations, at most BRIEF_LIMIT characters, cut between words)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return brief(lines[0]) if lines else type(exc).__name__


class ModelContradiction(DmlLowerError):
    """The model's declarations contradict what it computes (a value_info shape the values do not
    have): the model's fault, not a backend's, so `check` refuses the model (exit 2) instead of
    reporting one backend's ERROR."""


class MemoryLimitExceeded(DmlLowerError):
    """A run (its buffers, feeds, stacked loop outputs or a file read) needs more memory than the
    limit the user set (--memory-limit): the user's bound, not a backend's failure, so `check`
    stops with it (exit 2) instead of reporting one backend's ERROR."""
