"""A statement that names two slots keeps both propositions: "I work at Acme as a nurse" is an
employer and an occupation, each superseding on its own (no fragment, nothing dropped)."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from domain.extraction import extract_facts

AT = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.parametrize("text, employer, job", [
    ("I work at Acme as a nurse", "Acme", "nurse"),
    ("I work for the city council as an engineer and I love it", "the city council", "engineer"),
    ("I joined Initech as a data analyst.", "Initech", "data analyst"),
])
def test_employer_and_occupation_both_kept(text, employer, job):
    keyed = {f.key: f for f in extract_facts(text, AT) if f.key}
    assert keyed["employer"].value == employer and keyed["occupation"].value == job, keyed
    assert job in keyed["occupation"].content


def test_as_much_as_is_no_job():
    assert not [f for f in extract_facts("I work at home as much as I can", AT) if f.key == "occupation"]


@pytest.mark.parametrize("text", [
    "So I joined in.",                       # LoCoMo: stored as "User works at in"
    "I joined up with some friends.",
    "I joined a book club last month.",
    "I joined a local dance class.",
    "I joined the Harry Potter fan club.",
    "I switched to Spotify.",                # a product, where nothing speaks of work
])
def test_joining_a_pastime_is_no_employer(text):
    assert not [f for f in extract_facts(text, AT) if f.key == "employer"]


@pytest.mark.parametrize("text, employer", [
    ("I joined Google last month.", "Google"),
    ("I joined a startup in Berlin.", "a startup"),
    ("I switched to Spotify, the job there pays better.", "Spotify"),
    ("I started at Acme last week.", "Acme"),
])
def test_joining_a_workplace_is_the_employer(text, employer):
    assert [f.value for f in extract_facts(text, AT) if f.key == "employer"] == [employer]
