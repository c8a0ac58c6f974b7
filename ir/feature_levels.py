"""DML_FEATURE_LEVEL values (0x{major}{minor}00) and parsing of user spellings."""
from __future__ import annotations

import re
from functools import total_ordering

from .errors import DmlLowerError

_KNOWN = ("1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2",
          "6_0", "6_1", "6_2", "6_3", "6_4")


@total_ordering
class FeatureLevel:
    """One DirectML feature level; compares by its numeric value."""

    __slots__ = ("major", "minor")

    def __init__(self, major: int, minor: int) -> None:
        self.major, self.minor = major, minor

    @property
    def value(self) -> int:
        return (self.major << 12) | (self.minor << 8)

    @property
    def name(self) -> str:
        return f"{self.major}_{self.minor}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FeatureLevel) and self.value == other.value

    def __lt__(self, other: "FeatureLevel") -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"FeatureLevel({self.name})"

    def __str__(self) -> str:
        return self.name


ALL_LEVELS = tuple(FeatureLevel(int(n[0]), int(n[2])) for n in _KNOWN)
DEFAULT_LEVEL = FeatureLevel(5, 1)


def parse_level(level: "str | int | FeatureLevel") -> FeatureLevel:
    """Accept "5_1", "5.1", "DML_FEATURE_LEVEL_5_1", 0x5100 or a FeatureLevel."""
    if isinstance(level, FeatureLevel):
        return level
    if isinstance(level, int) and not isinstance(level, bool):
        found = [lv for lv in ALL_LEVELS if lv.value == level]
        if found:
            return found[0]
        raise DmlLowerError(f"unknown feature level 0x{level:x}; known: {', '.join(_KNOWN)}")
    text = str(level).strip()
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return parse_level(int(text, 16))
    match = re.fullmatch(r"(?:DML_FEATURE_LEVEL_)?(\d+)[._](\d+)", text, flags=re.IGNORECASE)
    if match:
        name = f"{match.group(1)}_{match.group(2)}"
        if name in _KNOWN:
            return FeatureLevel(int(match.group(1)), int(match.group(2)))
    raise DmlLowerError(f"unknown feature level {text!r}; known: {', '.join(_KNOWN)}")
