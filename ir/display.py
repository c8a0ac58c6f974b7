"""The one way a name (node, input, output, graph, file) is shown to a person or written into a
report: a model file is untrusted input, and its names may hold ESC sequences, BEL, CR, NUL or
other control characters that would drive a terminal, end a Markdown table row or make a JUnit
file ill-formed XML.

`display` escapes every such character visibly (`\\x1b`, `\\u202e`) and keeps printable Unicode;
`markdown_cell` also escapes what Markdown reads as markup (and the table's `|`), `markdown_code` makes a
code span of any text; `xml_text` keeps only what XML 1.0 allows;
`json_safe` turns the non-finite floats RFC 8259 has no token for into strings.
"""
from __future__ import annotations

from typing import Any, Sequence

import json
import math
import re

# C0 and C1 controls and DEL; U+2028 / U+2029 (line breaks to many readers); the bidirectional
# overrides and isolates (they reorder what follows on a terminal or in a review tool); lone
# surrogates (a name that was not UTF-8, decoded with surrogateescape).
_OTHERS = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_PATTERN = re.compile(f"[\x00-\x1f{_OTHERS}]")
_KEEP_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")     # as _PATTERN, without TAB and LF


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def display(text: object) -> str:
    """`text` on one line, every control or reordering character escaped visibly as \\xNN / \\uNNNN."""
    return _PATTERN.sub(_escape, str(text))


def display_lines(text: object) -> str:
    """As display, but line feeds and tabs stay (a multi-line report whose names are already
    displayed, guarded once more before it reaches a terminal)."""
    return _KEEP_LINES.sub(_escape, str(text))


# What Markdown (CommonMark, GitHub's tables and math) would read as markup in a cell's text: code
# spans, emphasis, links and images, raw HTML and autolinks, entities, strikethrough, math, the
# cell separator, and the backslash itself. Each is backslash-escaped (any ASCII punctuation may be).
_MARKUP = re.compile(r"([\\`*_\[\]<>&~$|])")


def markdown_cell(text: object) -> str:
    """Plain text for a Markdown table cell (or a paragraph): displayed (a CR or LF would end the
    row) and every character Markdown would read as markup escaped, so a name from the model
    renders as itself, never as a link, HTML or emphasis, and never splits the cell."""
    return _MARKUP.sub(r"\\\1", display(text))


def markdown_code(text: object, in_table: bool = True) -> str:
    """`text` as one Markdown code span (nothing inside is markup): displayed, its fence one
    backtick longer than the longest run of backticks inside, padded where the text begins or
    ends with a backtick or a space (CommonMark strips one space each side). In a table, `|` is
    escaped as `\\|` (GitHub's tables split cells before they read code spans)."""
    shown = display(text)
    if in_table:
        shown = shown.replace("|", "\\|")
    if not shown.strip(" "):
        return f"`{shown or ' '}`"       # all spaces (or none): CommonMark strips nothing from such a span
    fence = "`" * (max((len(run) for run in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown[:1] in ("`", " ") or shown[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


# What XML 1.0 allows: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].
# Written as its complement over Unicode (what it forbids): the same set, but the negated class with
# the astral range took 15-20 ms to compile on every command that imports this module.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: object) -> str:
    """Text for an XML 1.0 attribute or element: displayed (line breaks kept), then anything
    XML 1.0 forbids (U+FFFE, U+FFFF) escaped as well, so the file stays well-formed."""
    return _NOT_XML.sub(_escape, display_lines(text))


# A line a person reads whole (an error or warning on stderr) holds a model's name at any length:
# a run without a space longer than any path the kernel takes (PATH_MAX, 4096 bytes: a path a
# command wrote or read is always shown whole) keeps its head and tail; a line longer than
# LINE_MOST keeps its start and its end (the JSON forms keep every name whole).
_RUN_HEAD, _RUN_TAIL = 200, 100
_LONG_RUN = re.compile(r"\S{4097,}")
LINE_MOST = 20_000


def _elided(text: str, head: int, tail: int) -> str:
    return f"{text[:head]}...[{len(text) - head - tail:,} more characters]...{text[len(text) - tail:]}"


def bounded_line(text: str) -> str:
    """`text` (one or more lines) with every over-long run of non-space characters and then every
    line over LINE_MOST characters shortened in the middle, saying by how much."""
    text = _LONG_RUN.sub(lambda m: _elided(m.group(), _RUN_HEAD, _RUN_TAIL), text)
    if len(text) <= LINE_MOST:
        return text
    return "\n".join(_elided(line, LINE_MOST - 6000, 4000) if len(line) > LINE_MOST else line
                     for line in text.split("\n"))


# --json encodes the floats JSON has no token for as these strings (documented in README).
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float (anywhere in dicts, lists, tuples) replaced by the
    string "NaN", "Infinity" or "-Infinity": json.dumps(..., allow_nan=False) then succeeds and
    the document is strict RFC 8259 JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else NON_FINITE[repr(value)]
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def json_float(value: Any) -> Any:
    """A float field read back from such a document: "NaN" / "Infinity" / "-Infinity" as floats."""
    return float(value) if isinstance(value, str) and value in NON_FINITE.values() else value


def html_text(text: object) -> str:
    """Text for an HTML element or quoted attribute: displayed, then `<`, `>`, `&` and both quotes
    escaped, so a name such as `</script>"x` stays text."""
    return display(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") \
        .replace('"', "&quot;").replace("'", "&#x27;")


# In a <script type="application/json"> element nothing may read as markup: `</script>` or `<!--`
# would end or change it, so `<`, `>` and `&` go in as JSON escapes, which JSON.parse reads back.
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_json(value: Any) -> str:
    """`value` as strict JSON safe to place inside an HTML <script> element. Names inside it
    must already be displayed (the caller's data); this guards the markup, not the terminal."""
    text = json.dumps(json_safe(value), allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: _SCRIPT_UNSAFE[m.group()], text)


def name_list(names: "Sequence[str]", most: int = 8, noun: str = "nodes", sep: str = ", ") -> str:
    """Names for one line of a report: all of them up to `most` (or up to five: the shortened form
    shows five), else the first three, the last two and how many ('a, b, c, ... y, z (1234
    nodes)'): its '...' always stands for at least one name. The JSON forms keep every name."""
    names = [display(name) for name in names]        # a model's names: no control character gets out
    if len(names) <= max(most, 5):
        return sep.join(names)
    return f"{sep.join(names[:3])}{sep}... {sep.join(names[-2:])} ({len(names)} {noun})"
