"""The pictures README and docs show, made by the docs build (`make docs`) from shipped models.

Each picture is a 1600 x 1000 headless-Chromium screenshot of a page `dml-lower` writes, saved as
docs/images/NAME.png, with docs/images/NAME.json beside it: the command and what the page draws
(its blocks, copy edges, copies, nodes, as the page itself states them). tests/test_docs_images.py
holds the committed JSON to the current output without a browser, so a change of the picture's
content fails `make test` until `make docs` (or this module) makes the picture anew:

    .venv/bin/python -m tests.docs_images

The command runs as a user without `make directml` sees it (the DirectML setup hidden, as for the
transcripts), so the picture is the same on every machine. Without Chromium the committed
pictures are kept and one line says so (make picture-check and make docs install it as root).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", "--window-size=1600,1000"]


@dataclass(frozen=True)
class Picture:
    name: str                   # docs/images/NAME.png and NAME.json
    argv: "tuple[str, ...]"     # after `dml-lower`; "{html}" is the page it writes


PICTURES = (
    Picture("mask-rcnn-placement", ("inspect", "tests/models/real/mask_rcnn_mobilenet_v3.torchscript.onnx",
                                    "--ep", "dml", "--html", "{html}")),
)


def dml_lower() -> str:
    return shutil.which("dml-lower") or str(Path(sys.executable).parent / "dml-lower")


def write_page(picture: Picture, folder: Path) -> Path:
    """Runs the picture's command from the repository root; the page it wrote."""
    html = folder / f"{picture.name}.html"
    argv = [a.replace("{html}", str(html)) for a in picture.argv]
    env = dict(os.environ, DML_LOWER_DIRECTML_HOME=str(folder / "no-directml-setup"))
    done = subprocess.run([dml_lower(), *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"docs images: dml-lower {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return html


def page_json(html: Path, element: str) -> dict:
    found = re.search(rf'<script type="application/json" id="{element}">(.*?)</script>', html.read_text(), re.S)
    if found is None:
        raise SystemExit(f"docs images: {html} carries no {element} block")
    return json.loads(found.group(1))


def page_states(html: Path) -> dict:
    """What the page draws: its own `expected` counts (which the browser tests hold it to) and
    each block's stage and text as the overview shows them."""
    blocks = [[b["stage"], *b["lines"]] for b in page_json(html, "data")["blocks"]]
    return {**page_json(html, "expected"), "blocks_drawn": blocks}


def record(picture: Picture, html: Path) -> dict:
    return {"command": "dml-lower " + " ".join(a.replace("{html}", f"{picture.name}.html") for a in picture.argv),
            "page": page_states(html)}


def chromium() -> "str | None":
    return os.environ.get("DML_LOWER_CHROMIUM") or shutil.which("chromium")


def screenshot(browser: str, html: Path, png: Path, profile: Path) -> None:
    tmp = png.with_name(png.stem + ".partial.png")
    subprocess.run([browser, *BROWSER_FLAGS, f"--user-data-dir={profile}", f"--screenshot={tmp}", html.as_uri()],
                   capture_output=True, timeout=300, check=True)
    if tmp.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"docs images: Chromium wrote no PNG for {html}")
    tmp.replace(png)


def make_all() -> int:
    browser = chromium()
    if browser is None:
        print("docs images: Chromium not found; the committed docs/images/*.png kept (make picture-check installs it)")
        return 0
    IMAGES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dml-docs-images-") as tmp:
        for picture in PICTURES:
            html = write_page(picture, Path(tmp))
            screenshot(browser, html, IMAGES / f"{picture.name}.png", Path(tmp) / "profile")
            (IMAGES / f"{picture.name}.json").write_text(json.dumps(record(picture, html), indent=2) + "\n")
            print(f"docs images: docs/images/{picture.name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(make_all())
