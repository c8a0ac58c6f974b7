"""The pictures README and docs show (tests/docs_images.py) hold to the current output: the page
each one photographs states what it draws, and that must equal what was recorded when the picture
was made. A change of content fails here until `make docs` makes the picture anew."""
from __future__ import annotations

import json
import struct

import pytest

from tests.docs_images import IMAGES, PICTURES, ROOT, record, write_page


@pytest.mark.parametrize("picture", PICTURES, ids=lambda p: p.name)
def test_picture_is_of_the_current_output(picture, tmp_path):
    committed = json.loads((IMAGES / f"{picture.name}.json").read_text())
    current = record(picture, write_page(picture, tmp_path))
    assert committed == current, f"docs/images/{picture.name}.png is stale: run make docs"
    assert current["page"]["blocks"] > 3 and current["page"]["copies"] > 0


@pytest.mark.parametrize("picture", PICTURES, ids=lambda p: p.name)
def test_picture_is_a_screen_sized_png_the_docs_show(picture):
    png = (IMAGES / f"{picture.name}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (1600, 1000)
    shown = f"docs/images/{picture.name}.png"
    assert shown in (ROOT / "README.md").read_text()
    assert f"../images/{picture.name}.png" in (ROOT / "docs" / "commands" / "inspect.md").read_text()
