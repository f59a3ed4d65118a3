"""A reply keeps the question it answers (issue 30, item 5): domain/reply_context.py, the statement
channel's use of it, and the extractor's per-session memory of the assistant's last question."""
from __future__ import annotations

from datetime import UTC, datetime

from domain.extraction import extract_facts
from domain.reply_context import points_back, reply_pointer, reply_question, reply_remark, with_reply
from schemas.codec import make_envelope
from schemas.events import TurnRecorded
from streams.extraction_core import ReplyContexts

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_the_question_is_read_in_the_users_frame():
    assert reply_question("Thanks! How's it going with yoga? Have you noticed any improvements?") == \
        "How's it going with yoga? Has User noticed any improvements?"
    assert reply_question("Wow, what made you paint it?") == "What made User paint it?"
    assert reply_question("Are you coming to your sister's party?") == "Is User coming to User's sister's party?"


def test_no_question_or_one_about_the_speaker_gives_none():
    assert reply_question("That looks yummy!") is None
    assert reply_question("Did I tell you about my trip?") is None     # "I" is the other speaker, not the user
    assert reply_question(None) is None and reply_question("") is None
    assert reply_question("Ok?") is None                                 # too short to point at anything


def test_without_a_question_the_remark_that_names_something_is_the_pointer():
    """A reply's "it" often leans on what the other speaker said, not asked: their first sentence
    that names something, in the user's frame; never talk (thanks, praise of what they heard, words
    to the user by name) and never the other speaker about themselves."""
    assert reply_remark("That themed tree looks amazing! You really know how to get the vibes just right!") == \
        "That themed tree looks amazing!"
    assert reply_remark("Cool, Melanie! Running can really boost your mood. Keep it up!") == "Running can really boost User's mood"
    assert reply_remark("Max looks so peaceful in that photo, just chilling in the backyard.") == \
        "Max looks so peaceful in that photo, just chilling in the backyard"
    for talk in ("Way to go, Jon!", "John, that's a great pic!", "It must be really awesome!", "What a kind gesture.",
                 "Wow, that's really amazing to hear.", "Thanks so much for sharing!", "I went hiking with my dad last week.",
                 None, ""):
        assert reply_remark(talk) is None, talk
    # a question wins: it is what the reply answers
    assert reply_pointer("Your garden looks lovely and green. What did you plant?") == "What did User plant?"
    assert reply_pointer("Your garden looks lovely and green.") == "User's garden looks lovely and green"


def test_what_leans_on_something_it_does_not_name():
    for content in ("It's helped User a lot with strength", "They signed it for User", "That was amazing",
                    "User painted it because it was calming", "User will remember them",
                    "User loves his tech and that sarcastic humor", "User met her at the gym",
                    "User has been working on for a while", "At dance class User felt it (on 2026-07-21)",
                    "User will make sure to remember this", "User might check that one out soon",
                    "Playing it helps User get their emotions out"):
        assert points_back(content), content
    for content in ("User painted a sunset", "User loves that purple color", "User's sister lives in Rome",
                    "Itzel is User's friend", "User has a red bike", "User's sister and her husband live in Rome",
                    "User worked at Google for years", "User went to the store for milk",
                    "User thinks that the plan works", "User loves this book", "User knows that it works",
                    "Playing chess helps User relax"):
        assert not points_back(content), content


def test_the_question_goes_before_the_resolved_date_and_never_past_the_limit():
    assert with_reply("User took it at the beach (week of 2026-11-23)", "Where was that?", 300) == \
        "User took it at the beach (in reply to: Where was that?) (week of 2026-11-23)"
    assert with_reply("It was fun", "x" * 400, 300) == "It was fun"


def test_a_statement_that_leans_on_the_question_keeps_it_and_others_do_not():
    q = reply_question("How's it going with yoga? Have you noticed any improvements?")
    facts = [d.content for d in extract_facts("Thanks! It's helped me improve my strength and flexibility during my "
                                              "workouts. I also adopted a cat named Miso last week.", at=AT, reply_to=q)]
    assert any(c.startswith("It's helped User") and "(in reply to: How's it going with yoga?" in c for c in facts), facts
    assert any("Miso" in c and "in reply to" not in c for c in facts), facts
    # without a question the statement is kept as said: nothing else of the turn is kept (statements 6.)
    alone = [d.content for d in extract_facts("Thanks! It's helped me improve my strength and flexibility during my "
                                              "workouts.", at=AT)]
    assert alone and not any("in reply to" in c for c in alone)


def test_only_a_turns_first_sentences_take_the_question():
    q = "How is the new treatment going?"
    late = "Hi there! How are you doing? Thanks for asking about it. Great to hear from you again. It has really helped my back pain and my sleep."
    facts = [d.content for d in extract_facts(late, at=AT, reply_to=q)]
    assert facts and not any("in reply to" in c for c in facts), facts     # a later sentence leans on the turn itself
    early = "Hi there! It has really helped my back pain and my sleep."
    assert any("in reply to: How is the new treatment going?" in d.content for d in extract_facts(early, at=AT, reply_to=q))


def _turn(user, session, role, text):
    return make_envelope(TurnRecorded(session=session, role=role, content=text), user=user, time=AT, producer="test")


def test_contexts_follow_each_users_session_and_never_come_from_later_in_the_log():
    c = ReplyContexts()
    assert c.observe((0, 1), _turn("ann", "s1", "assistant", "How's the new job going?")) is None
    assert c.observe((0, 2), _turn("ann", "s1", "user", "It's great")) == "How's the new job going?"
    assert c.observe((0, 3), _turn("ann", "s2", "user", "It's great")) is None        # another session
    assert c.observe((0, 4), _turn("bob", "s1", "user", "It's great")) is None        # another user
    c.observe((0, 9), _turn("ann", "s1", "assistant", "And your sister?"))
    # a record read again after a rebalance (offset 2 < 9): the later question is not its context
    assert c.observe((0, 2), _turn("ann", "s1", "user", "It's great")) is None
    assert c.observe((1, 10), _turn("ann", "s1", "user", "It's great")) is None      # another partition


def test_a_remark_is_a_context_too():
    c = ReplyContexts()
    c.observe((0, 1), _turn("ann", "s1", "assistant", "Color-coding is a great way to track your progress!"))
    assert c.observe((0, 2), _turn("ann", "s1", "user", "It keeps me going")) == \
        "Color-coding is a great way to track User's progress!"


def test_contexts_are_bounded():
    c = ReplyContexts(max_sessions=2)
    for i in range(3):
        c.observe((0, i), _turn("ann", f"s{i}", "assistant", "What did you cook today?"))
    assert c.observe((0, 10), _turn("ann", "s0", "user", "It was pasta")) is None     # evicted, oldest first
    assert c.observe((0, 11), _turn("ann", "s2", "user", "It was pasta")) == "What did User cook today?"


def test_a_statement_whose_object_is_the_sentence_befores_joins_it():
    """"I highly recommend it" after the sentence naming the book is one fact, as a statement
    whose subject points back is; "them" that is the user ("art lets me" → "lets them") is not."""
    facts = [d.content for d in extract_facts("I'm currently reading a book that I really enjoy. I highly recommend it.")]
    assert facts == ["User is currently reading a book that User really enjoys. User highly recommends it"]
    facts = [d.content for d in extract_facts("I have done an abstract painting too. I love how art lets me get my emotions out.")]
    assert len(facts) == 2, facts
    assert points_back("User got them online") and not points_back("User loves how art lets them get their emotions out")
