"""The rule channel, in-process and deterministic (no I/O)."""
from memstream.domain.extraction import extract_rules


def facts(text):
    return [(d.key, d.value, d.category) for d in extract_rules(text)]


def test_chinese_identity_location_and_preferences():
    assert facts("你好！我叫张三，我住在北京。我喜欢喝咖啡，我不喜欢香菜") == [
        ("name", "张三", "identity"),
        ("location", "北京", "identity"),
        ("likes:喝咖啡", "true", "preference"),
        ("likes:香菜", "false", "preference"),
    ]


def test_english_identity_location_and_preferences():
    assert facts("Hi, my name is Alice and I live in Paris. I really like green tea! I don't like rain.") == [
        ("name", "Alice", "identity"),
        ("location", "Paris", "identity"),
        ("likes:green tea", "true", "preference"),
        ("likes:rain", "false", "preference"),
    ]


def test_content_sentence_is_in_the_turns_language():
    (zh,) = extract_rules("我叫李四")
    (en,) = extract_rules("My name is Bob.")
    assert zh.content == "用户叫李四"
    assert en.content == "User's name is Bob"


def test_negative_form_is_not_read_as_positive():
    assert facts("我不喜欢下雨") == [("likes:下雨", "false", "preference")]
    assert facts("I don't like meetings") == [("likes:meetings", "false", "preference")]


def test_small_talk_extracts_nothing():
    assert extract_rules("今天天气不错") == []
    assert extract_rules("What time is it?") == []


def test_english_value_stops_before_a_new_thought():
    assert facts("I moved to Berlin last month") == [("location", "Berlin", "identity")]
    assert facts("I like hiking with friends and I live in New York now") == [
        ("likes:hiking", "true", "preference"), ("location", "New York", "identity")]
