"""The rule channel, in-process and deterministic (no I/O)."""
from domain.extraction import extract_rules


def facts(text):
    return [(d.key, d.value, d.category) for d in extract_rules(text)]


def test_chinese_identity_location_and_preferences():
    assert facts("你好！我叫张三，我住在北京。我喜欢喝咖啡，我不喜欢香菜") == [
        ("name", "张三", "identity"),
        ("location", "北京", "identity"),
        ("likes:咖啡", "true", "preference"),
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


# -- constraints and standing instructions (category "policy") --------------------------------

def policies(text):
    return [(d.key, d.value, d.content) for d in extract_rules(text) if d.category == "policy"]


def test_chinese_dietary_constraints_and_allergies():
    assert policies("我不吃香菜") == [("constraint:no-eat:香菜", "true", "用户不吃香菜")]
    assert policies("我对花生过敏") == [("constraint:allergy:花生", "true", "用户对花生过敏")]
    assert policies("我不喝酒") == [("constraint:no-drink:酒", "true", "用户不喝酒")]


def test_english_dietary_constraints_and_allergies():
    assert policies("I'm allergic to peanuts.") == [("constraint:allergy:peanuts", "true", "User is allergic to peanuts")]
    assert policies("I don't eat pork") == [("constraint:no-eat:pork", "true", "User does not eat pork")]
    assert policies("I have a severe allergy to shellfish") == [
        ("constraint:allergy:shellfish", "true", "User is allergic to shellfish")]


def test_chinese_instructions_are_policies_in_the_third_person():
    assert policies("请不要在晚上给我打电话") == [
        ("constraint:dont:在晚上给我打电话", "true", "用户要求不要在晚上给用户打电话")]
    assert policies("你不要再推荐恐怖片了") == [("constraint:dont:推荐恐怖片", "true", "用户要求不要推荐恐怖片")]
    assert policies("以后一定要用中文回答") == [("constraint:always:用中文回答", "true", "用户要求一定要用中文回答")]


def test_english_instructions_are_policies_in_the_third_person():
    assert policies("Please don't call me after 9pm.") == [
        ("constraint:dont:call me after 9pm", "true", "User asks not to call them after 9pm")]
    assert policies("Never use emojis") == [("constraint:dont:use emojis", "true", "User asks not to use emojis")]
    assert policies("Always answer in English when I ask in English") == [
        ("constraint:always:answer in english", "true", "User asks to always answer in English")]


def test_policy_facts_carry_high_importance_and_a_constraint_slot():
    for text in ("我不吃香菜", "I'm allergic to peanuts", "请不要在晚上给我打电话", "please don't call me"):
        (d,) = extract_rules(text)
        assert (d.category, d.importance, d.slot_hint) == ("policy", 0.9, "constraint"), text


def test_instructions_do_not_swallow_other_rules_or_small_talk():
    # "I don't like" is a preference, not an instruction; "don't worry" is small talk.
    assert facts("I don't like rain") == [("likes:rain", "false", "preference")]
    assert extract_rules("Don't worry about it") == []
    assert extract_rules("never mind") == []
    assert extract_rules("我不要咖啡") == []  # "I don't want coffee" (now), not a standing rule
    # An instruction claims its span, so "Never call me Bob" is not the name "Bob".
    assert facts("Never call me Bob") == [("constraint:dont:call me bob", "true", "policy")]
    assert facts("我对花生过敏，我喜欢喝咖啡") == [
        ("constraint:allergy:花生", "true", "policy"), ("likes:咖啡", "true", "preference")]
    assert facts("I don't eat pork and I like jazz") == [
        ("constraint:no-eat:pork", "true", "policy"), ("likes:jazz", "true", "preference")]


def test_encouragement_and_subjectless_clauses_are_not_instructions():
    # Chit-chat between people is full of "Don't give up!"; none of it is a standing instruction.
    for text in ("Don't give up!", "Never give up on your dreams.", "Don't forget to take breaks",
                 "Don't be afraid to write and share", "Don't ever quit on what you love.",
                 "Nope, never been to something like that.", "Always here to help!", "Always been interested in art",
                 "Animals bring joy, don't they?", "Don't hesitate to reach out."):
        assert [d for d in extract_rules(text) if d.category == "policy"] == [], text
    assert facts("Don't ever call me after 9pm") == [("constraint:dont:call me after 9pm", "true", "policy")]


def test_a_pronoun_or_a_clause_is_not_a_liked_thing():
    for text in ("I love it!", "I love how you tell your stories", "I like your turtles so much", "I'd love to hear more",
                 "I love that you chose pottery"):
        assert [d for d in extract_rules(text) if d.slot_hint == "likes"] == [], text
    assert facts("I love live music") == [("likes:live music", "true", "preference")]


def test_the_thing_liked_is_written_about_the_user_in_the_third_person():
    """The memory's content never speaks as the user ("User likes seeing my teammates succeed" was
    stored); the slot's key keeps the words as said, so the same thing said again is the same slot."""
    got = {d.key: d.content for d in extract_rules("I love seeing my teammates succeed.") if d.slot_hint == "likes"}
    assert got == {"likes:seeing my teammates succeed": "User likes seeing their teammates succeed"}
    got = {d.key: d.content for d in extract_rules("我喜欢我的猫") if d.slot_hint == "likes"}
    assert got == {"likes:我的猫": "用户喜欢用户的猫"}
    later = [d.key for d in extract_rules("I don't like seeing my teammates succeed anymore") if d.slot_hint == "likes"]
    assert later == ["likes:seeing my teammates succeed"]


def test_a_thing_liked_that_is_someone_elses_is_not_a_preference_slot():
    """"I love their work" names nothing alone: no likes:their work slot (the statement channel keeps
    the sentence with what it leans on, tests/fast/test_statements.py)."""
    for text in ("I love their work.", "I really love having them around.", "I love his tech and that sarcastic humor.",
                 "I like her cooking.", "我喜欢他的画。", "我很喜欢她的歌"):
        assert not [f for f in facts(text) if f[0].startswith("likes:")], text
    # the user's own things stay preferences
    assert facts("I love my garden") == [("likes:my garden", "true", "preference")]
    assert facts("我喜欢我的猫") == [("likes:我的猫", "true", "preference")]


def test_a_household_move_is_the_users_move():
    assert facts("We moved to Berlin last month.") == [("location", "Berlin", "identity")]
    assert facts("We're living in Toronto now") == [("location", "Toronto", "identity")]
    assert facts("We just moved from Paris to Lyon") == [("location", "Lyon", "identity")]
