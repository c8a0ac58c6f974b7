"""Where the repository's files are, for tests at any depth (no Path(__file__).parent chains)."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MODELS = REPO / "tests" / "models"        # the exported models; real/ holds the real-model exports
REAL = MODELS / "real"
