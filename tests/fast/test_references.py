"""references.unresolved (issue 30 item 5): which statements name nothing of what they speak of."""
from __future__ import annotations

import pytest

from domain.references import unresolved


@pytest.mark.parametrize("content, word", [
    ("It brings User so much happiness", "It"),
    ("User has been waiting for this for a long time", "this"),
    ("User is planning a trip there (in September 2023)", "there"),
    ("User has always wanted to try the seafood there", "there"),
    ("She showed User the importance of kindness", "She"),
    ("User will look into that, it could be fun", "that"),
    ("That's why User loves traveling", "that"),
    ("User even got this as a treat", "this"),
    ("User is obsessed with those, so made something", "those"),
    ("Playing it helps User get their emotions out", "it"),
    # a question that names nothing does not help
    ("User painted it (in reply to: Did User paint it?)", "it"),
    ("They signed it for User (in reply to: Did they sign it for a special reason?)", "They"),
    ("Their love gives User strength", "Their"),     # "their" opening the statement is someone's
])
def test_a_pointing_word_with_nothing_it_may_stand_for(content, word):
    assert unresolved(content) == word


@pytest.mark.parametrize("content", [
    "User got a new bike, and loves it",                       # a noun phrase before it
    "It's great to see fans coming together",                  # a dummy "it"
    "It's been a while since User painted",
    "It's a beginner yoga class, focusing on fundamentals",    # it says what it is
    "User is gonna make it happen",                            # an idiom
    "User thinks that the plan works",                         # "that" opening a clause
    "The book that changed User's life is Dune",
    "User likes coffee that is strong",
    "This necklace is super special to User",                  # a demonstrative with its noun
    "User's sister lives in Rome and she is a nurse",          # a person named before
    "Her name is Shadow. She's full of energy",
    "User went to Paris and the food there was amazing",       # a place named before
    "There is a new cafe near User's home",                    # existential
    "User is drawn to turtles. They're unique",
    "User started surfing and it's been great",                # an activity by its gerund
    "User injured themselves not long ago. It sucked because User missed games",   # a clause of its own
    "User painted it after the trip (in reply to: What made User paint the sunset?)",
    "It brings User so much happiness (context: The new running club downtown is great)",
    "It's helped User a lot (in reply to: How's it going with yoga? Has User noticed any improvements?)",
    "User loves their dog. Their fur is soft",
])
def test_a_statement_that_names_what_it_speaks_of(content):
    assert unresolved(content) is None, unresolved(content)


def test_only_the_statement_is_searched_not_its_question():
    assert unresolved("User painted a sunset (in reply to: What made User paint it?)") is None
