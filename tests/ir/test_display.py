"""ir.display: the one function names are shown through (issue 27), its Markdown / XML / JSON forms."""
from __future__ import annotations

import json
import math
import unicodedata
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display, display_lines, json_float, json_safe, markdown_cell, markdown_code, xml_text

HOSTILE = ["\x1b[31mred\x1b[0m", "bell\x07", "cr\rover", "nul\x00", "lf\nline", "del\x7f", "c1\x9b2J",
           "bidi\u202eevil", "sep\u2028x", "tab\tx", "surrogate\udcff"]


def _visible(text: str) -> bool:
    """No character a terminal acts on or reorders: controls, separators, bidi overrides, surrogates."""
    return not any(unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or 0x202A <= ord(c) <= 0x202E
                   or 0x2066 <= ord(c) <= 0x2069 for c in text)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_characters_are_escaped_visibly_as_their_code(name):
    shown = display(name)
    assert _visible(shown)
    for char in name:
        if not _visible(char):
            code = ord(char)
            assert (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}") in shown


@pytest.mark.parametrize("name", ["plain", "naïve_ü", "中文名", "emoji_🙂", "a|b", "back\\slash", "sp ace"])
def test_printable_unicode_is_kept(name):
    assert display(name) == name


@given(st.text())
def test_display_is_visible_and_idempotent(text):
    shown = display(text)
    assert _visible(shown) and display(shown) == shown and "\n" not in shown


@given(st.text())
def test_display_lines_keeps_only_line_feeds_and_tabs(text):
    shown = display_lines(text)
    assert _visible(shown.replace("\n", "").replace("\t", ""))
    assert shown.count("\n") == text.count("\n")


@given(st.text())
def test_a_markdown_cell_never_ends_a_row_or_splits_a_cell(text):
    cell = markdown_cell(text)
    assert "\n" not in cell and "\r" not in cell
    assert cell.replace("\\|", "").count("|") == 0


@given(st.text())
def test_xml_text_is_well_formed_in_attributes_and_text(text):
    element = ET.Element("case", name=xml_text(text))
    element.text = xml_text(text)
    parsed = ET.fromstring(ET.tostring(element, encoding="unicode"))   # raises on a character XML 1.0 forbids
    assert parsed.get("name") is not None


@pytest.mark.parametrize("value, encoded", [(float("nan"), "NaN"), (float("inf"), "Infinity"),
                                            (float("-inf"), "-Infinity"), (1.5, 1.5), (0.0, 0.0)])
def test_non_finite_floats_are_strings_in_strict_json(value, encoded):
    document = json_safe({"x": [value, {"y": (value,)}]})
    text = json.dumps(document, allow_nan=False)          # strict RFC 8259: would raise on a bare NaN
    assert json.loads(text) == {"x": [encoded, {"y": [encoded]}]}
    back = json_float(json.loads(text)["x"][0])
    assert (math.isnan(back) and math.isnan(value)) or back == value


@pytest.mark.parametrize("name", HOSTILE)
def test_an_error_line_is_one_visible_line(name):
    message = str(DmlLowerError(f"node {name}: input {name} is wrong"))
    assert "\n" not in message and _visible(message)


def test_the_xml_pattern_forbids_exactly_what_xml_1_0_does():
    """Every Unicode code point, against the XML 1.0 Char production as the spec writes it
    (the pattern is written as its complement, which compiles in a fraction of the time)."""
    from onnx_dml_lowering.ir.display import _NOT_XML
    allowed = [(0x9, 0x9), (0xA, 0xA), (0xD, 0xD), (0x20, 0xD7FF), (0xE000, 0xFFFD), (0x10000, 0x10FFFF)]
    every = "".join(map(chr, range(0x110000)))
    forbidden = {ord(m.group()) for m in _NOT_XML.finditer(every)}
    expected = {c for c in range(0x110000) if not any(low <= c <= high for low, high in allowed)}
    assert forbidden == expected
    assert xml_text("a\ufffeb\uffff") == "a\\ufffeb\\uffff"


def _rendered_cell(cell: str) -> "list":
    """The inline tokens of a one-row table's only body cell, as a CommonMark + GitHub-table
    renderer (markdown-it-py, the test extra) reads `cell`."""
    from markdown_it import MarkdownIt
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(f"| h |\n|---|\n| {cell} |\n")
    cells = [t for t in tokens if t.type == "inline"]
    assert len(cells) == 2, cells               # the header's and the one body cell's: nothing split
    return cells[1].children or []


@given(st.text())
def test_a_markdown_cell_renders_as_its_text_and_nothing_else(text):
    children = _rendered_cell(markdown_cell(text))
    assert {c.type for c in children} <= {"text"}, children     # no link, HTML, emphasis or code
    assert "".join(c.content for c in children).strip() == display(text).strip()    # a table trims a cell


@given(st.text())
def test_a_markdown_code_span_holds_exactly_the_text(text):
    children = _rendered_cell(markdown_code(text))
    assert [c.type for c in children] == ["code_inline"], children
    assert children[0].content == (display(text) or " ")


@pytest.mark.parametrize("name", ["a`|b\n# H1 [x](javascript:alert(1))", "``", "` x `", "<script>x</script>",
                                  "*a* _b_ ~~c~~ $d$ &amp; \\|"])
def test_hostile_names_render_as_themselves(name):
    children = _rendered_cell(markdown_cell(name))
    assert "".join(c.content for c in children) == display(name).strip()
    assert _rendered_cell(markdown_code(name))[0].content == display(name)


def test_a_displayed_name_is_never_repr_d_again():
    """`{display(x)!r}` escaped each backslash display wrote once more ('x\\\\x1b[2J' for a name holding ESC);
    a displayed name is quoted as '{display(x)}'. Every source file of the package, read as text."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"display\((?:[^()]|\([^()]*\))*\)!r")
    found = [f"{path.relative_to(root)}:{number}" for folder in ("compiler", "runtime", "lowering", "ir")
             for path in sorted((root / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []


@given(st.text(min_size=0, max_size=30), st.integers(0, 9000), st.text(alphabet="ab ", max_size=30))
def test_a_bounded_line_keeps_paths_whole_and_shortens_longer_runs_saying_by_how_much(head, length, tail):
    from onnx_dml_lowering.ir.display import bounded_line
    name = "n" * length
    line = f"{head} node '{name}' {tail}"
    shown = bounded_line(line)
    if length + 2 <= 4096:          # as long as a path can be (PATH_MAX): whole
        assert shown == line
    else:
        assert len(shown) < 400 and f"[{length + 2 - 300:,} more characters]" in shown
        assert shown.startswith(f"{head} node '" + "n" * 190) and shown.endswith("n" * 90 + f"' {tail}")


def test_a_line_of_many_short_words_is_shortened_in_its_middle_line_by_line():
    from onnx_dml_lowering.ir.display import LINE_MOST, bounded_line
    long = "start " + "a b " * 20000 + "end"
    shown = bounded_line(f"first\n{long}\nlast")
    first, middle, last = shown.split("\n")
    assert (first, last) == ("first", "last")
    assert len(middle) < LINE_MOST + 100 and middle.startswith("start a b") and middle.endswith("a b end")
    assert f"[{len(long) - (LINE_MOST - 2000):,} more characters]" in middle
