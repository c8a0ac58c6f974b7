"""ir.feature_levels: the 15 DML_FEATURE_LEVELs, their 0x{x}{y}00 values, parsing and ordering."""
import pytest

from onnx_dml_lowering.ir import ALL_LEVELS, DEFAULT_LEVEL, DmlLowerError, FeatureLevel, parse_level

# DML_FACTS section 3, transcribed.
SPEC_LEVELS = [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (4, 0), (4, 1), (5, 0), (5, 1), (5, 2),
               (6, 0), (6, 1), (6, 2), (6, 3), (6, 4)]
SPEC_VALUE = {f"{x}_{y}": int(f"0x{x}{y}00", 16) for x, y in SPEC_LEVELS}


def test_all_fifteen_levels_in_order():
    assert len(ALL_LEVELS) == 15
    assert [lv.name for lv in ALL_LEVELS] == [f"{x}_{y}" for x, y in SPEC_LEVELS]


def test_values_are_hex_major_minor_00():
    assert {lv.name: lv.value for lv in ALL_LEVELS} == SPEC_VALUE
    assert SPEC_VALUE["1_0"] == 0x1000 and SPEC_VALUE["5_1"] == 0x5100 and SPEC_VALUE["6_4"] == 0x6400


def test_default_is_5_1():
    assert DEFAULT_LEVEL.name == "5_1"
    assert DEFAULT_LEVEL.value == 0x5100


@pytest.mark.parametrize("name", list(SPEC_VALUE))
def test_every_spelling_parses_to_the_same_level(name):
    x, y = name.split("_")
    value = SPEC_VALUE[name]
    spellings = [name, f"{x}.{y}", f"DML_FEATURE_LEVEL_{name}", value, hex(value), f"0x{value:X}",
                 f" {name} ", f"dml_feature_level_{name}"]
    parsed = [parse_level(s) for s in spellings]
    for spelling, level in zip(spellings, parsed):
        assert isinstance(level, FeatureLevel), spelling
        assert level.name == name, spelling
        assert level.value == value, spelling
        assert str(level) == name
    assert len(set(parsed)) == 1
    assert parse_level(parsed[0]) == parsed[0]


def test_the_briefs_spellings_of_5_1():
    for spelling in ("5_1", "5.1", "DML_FEATURE_LEVEL_5_1", 0x5100, "0x5100"):
        assert parse_level(spelling) == FeatureLevel(5, 1)
        assert parse_level(spelling).value == 0x5100


@pytest.mark.parametrize("spelling", ["7_0", "5_3", 0x5300, "abc", "0x5300", "6_5", "1_1", "0_0",
                                      "DML_FEATURE_LEVEL_7_0", "", "5", "5__1", "5_1_0", 0, 0x5101,
                                      0x51, -1, "0x", "5.1.0", "FEATURE_LEVEL_5_1"])
def test_unknown_levels_raise_one_line(spelling):
    with pytest.raises(DmlLowerError) as info:
        parse_level(spelling)
    message = str(info.value)
    assert message
    assert "\n" not in message
    assert "feature level" in message.lower()


@pytest.mark.parametrize("spelling", ["7_0", "5_3", "abc"])
def test_unknown_level_message_names_the_spelling(spelling):
    with pytest.raises(DmlLowerError, match=spelling):
        parse_level(spelling)


def test_unknown_int_level_message_names_the_value():
    with pytest.raises(DmlLowerError, match="(?i)0x5300"):
        parse_level(0x5300)


def test_bool_is_not_a_level():
    with pytest.raises(DmlLowerError):
        parse_level(True)


def test_ordering_follows_values():
    levels = [parse_level(n) for n in SPEC_VALUE]
    assert sorted(reversed(levels)) == levels
    for i, a in enumerate(levels):
        for j, b in enumerate(levels):
            assert (a < b) == (i < j)
            assert (a <= b) == (i <= j)
            assert (a > b) == (i > j)
            assert (a >= b) == (i >= j)
            assert (a == b) == (i == j)
    assert parse_level("4_1") < parse_level("5_0") < parse_level("5_1") < parse_level("6_0")
    assert max(levels).name == "6_4" and min(levels).name == "1_0"


def test_levels_hash_by_value():
    assert len({parse_level("5_1"), FeatureLevel(5, 1), parse_level(0x5100)}) == 1
    assert {lv: lv.name for lv in ALL_LEVELS}[FeatureLevel(3, 0)] == "3_0"


def test_level_is_not_equal_to_other_types():
    assert parse_level("5_1") != "5_1"
    assert parse_level("5_1") != 0x5100
