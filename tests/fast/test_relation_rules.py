"""Relational decisions (#26), in-process: the pure rules (domain/relation_rules.py) and
the memory core's `on_relations` (sealed state, re-decided after a crash, what-if's plain core)."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.entities import SELF, USER, Mention, RelationDraft
from domain.relation_rules import UNKNOWN_START, GraphState, decide_relations
from kernel.ids import derived_id, uuid7
from schemas.codec import decode, encode, make_envelope
from schemas.events import RelationsExtracted
from streams.extraction_core import relation_claims
from tests.fast.test_memory_core import StaticKeys, plain_core, sealed_core, summary

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
ANA = Mention("person", name="Ana", role="sister")
SISTER = Mention("person", role="sister")
SHE = Mention("person", pronoun="she")


def place(name: str) -> Mention:
    return Mention("place", name=name)


class Turns:
    """One user's turns through the pure rules, the graph carried along."""

    def __init__(self, base: str | None = None):
        self.graph = GraphState()
        self.n = 0
        self.base = base or uuid7()

    def say(self, *drafts: RelationDraft, at: datetime = T0, session: str = "s1") -> list[tuple[str, object]]:
        self.n += 1
        turn = derived_id(self.base, f"turn:{self.n}")
        return decide_relations(self.graph, list(drafts), session=session, at=at.timestamp(), source_turn=turn,
                                new_id=lambda tag: derived_id(turn, tag))

    def current(self) -> set[tuple[str, str, str]]:
        name = {eid: e.name or e.aliases[0] for eid, e in self.graph.entities.items()} | {SELF: "user"}
        return {(name[c.subject], c.predicate, name[c.object]) for c in self.graph.current.values()}


def types(pairs) -> list[str]:
    return [d.TYPE for _, d in pairs]


def test_a_named_sister_then_she_lives_in_rome_links_ana_and_rome():
    t = Turns()
    first = t.say(RelationDraft(USER, "sister", ANA))
    assert types(first) == ["entity.observed", "relation.asserted"]
    assert first[0][1].name == "Ana" and first[0][1].aliases == ["sister"]
    # a later turn of the same session: "She lives in Rome."
    second = t.say(RelationDraft(SHE, "lives_in", place("Rome")), at=T0 + timedelta(minutes=1))
    assert types(second) == ["entity.observed", "relation.asserted"]
    assert t.current() == {("user", "sister", "Ana"), ("Ana", "lives_in", "Rome")}


def test_a_pronoun_with_no_one_to_refer_to_is_not_kept():
    t = Turns()
    assert t.say(RelationDraft(SHE, "lives_in", place("Rome"))) == []
    assert t.graph.entities == {} and t.graph.current == {}
    # nor does a person of another session count
    t.say(RelationDraft(USER, "sister", ANA), session="s1")
    assert t.say(RelationDraft(SHE, "lives_in", place("Rome")), session="s2") == []


def test_my_sister_then_her_name_is_one_sister_named():
    t = Turns()
    t.say(RelationDraft(USER, "sister", SISTER))
    out = t.say(RelationDraft(USER, "sister", ANA))
    assert types(out) == ["entity.observed"] and out[0][1].name == "Ana"
    assert len(t.graph.entities) == 1 and t.current() == {("user", "sister", "Ana")}
    # "my sister" afterwards is Ana
    t.say(RelationDraft(SISTER, "works_at", Mention("organisation", name="Google")))
    assert ("Ana", "works_at", "Google") in t.current()


def test_a_move_ends_the_old_city_at_the_new_ones_start_and_a_restatement_adds_nothing():
    t = Turns()
    t.say(RelationDraft(USER, "lives_in", place("Paris")))
    moved = t.say(RelationDraft(USER, "lives_in", place("Berlin"), event_date="2025-06-01"), at=T0 + timedelta(days=30))
    assert types(moved) == ["entity.observed", "relation.ended", "relation.asserted"]
    ended, asserted = moved[1][1], moved[2][1]
    assert ended.reason == "superseded" and ended.ended_by == asserted.relation_id
    # the old one started at T0, the move is dated before it: the end never precedes the start
    assert ended.valid_to == T0
    assert t.current() == {("user", "lives_in", "Berlin")}
    assert t.say(RelationDraft(USER, "lives_in", place("berlin")), at=T0 + timedelta(days=31)) == []


def test_moved_from_a_city_never_heard_of_records_it_as_held_until_the_move():
    t = Turns()
    out = t.say(RelationDraft(USER, "lives_in", place("Paris"), ended=True, event_date="2025-03-01"),
                RelationDraft(USER, "lives_in", place("Berlin"), event_date="2025-03-01"))
    kinds = types(out)
    assert kinds.count("entity.observed") == 2 and kinds[2:] == ["relation.asserted", "relation.ended",
                                                                   "relation.asserted"]
    held, end, now = out[2][1], out[3][1], out[4][1]
    assert held.valid_from == UNKNOWN_START and end.valid_to == datetime(2025, 3, 1, tzinfo=UTC)
    assert now.valid_from == datetime(2025, 3, 1, tzinfo=UTC) and t.current() == {("user", "lives_in", "Berlin")}


def test_many_friends_coexist_and_a_negation_ends_only_what_holds():
    t = Turns()
    t.say(RelationDraft(USER, "friend", Mention("person", name="Mel", role="friend")),
          RelationDraft(USER, "friend", Mention("person", name="Tom", role="friend")))
    assert t.current() == {("user", "friend", "Mel"), ("user", "friend", "Tom")}
    assert t.say(RelationDraft(USER, "lives_in", place("Rome"), negated=True)) == []   # nothing held: nothing
    t.say(RelationDraft(Mention("person", name="Mel"), "lives_in", place("Oslo")))
    out = t.say(RelationDraft(Mention("person", name="mel"), "lives_in", place("Oslo"), negated=True))
    assert types(out) == ["relation.ended"] and out[0][1].reason == "negated"
    assert ("Mel", "lives_in", "Oslo") not in t.current()


def test_we_broke_up_ends_whoever_holds_the_role():
    t = Turns()
    t.say(RelationDraft(USER, "boyfriend", Mention("person", name="Sam", role="boyfriend")))
    out = t.say(RelationDraft(USER, "boyfriend", Mention("person", role="boyfriend"), ended=True))
    assert types(out) == ["relation.ended"] and out[0][1].reason == "stated"
    assert t.current() == set()


def test_an_unknown_predicate_and_a_self_loop_decide_nothing():
    t = Turns()
    assert t.say(RelationDraft(USER, "teleported_to", place("Mars"))) == []
    assert t.say(RelationDraft(USER, "friend", USER)) == []


def test_the_graph_state_round_trips_and_ids_derive_from_the_cause():
    base = uuid7()
    a, b = Turns(base), Turns(base)
    drafts = (RelationDraft(USER, "sister", ANA), RelationDraft(SHE, "lives_in", place("Rome")))
    assert [(tag, d.model_dump()) for tag, d in a.say(*drafts)] == [(tag, d.model_dump()) for tag, d in b.say(*drafts)]
    again = GraphState.from_dict(a.graph.to_dict())
    assert again.to_dict() == a.graph.to_dict()


# -- through the memory core --------------------------------------------------------------------

def claims_event(user: str, drafts, at: datetime, session: str = "s1"):
    eid = uuid7()
    data = RelationsExtracted(source_turn=uuid7(), session=session, claims=relation_claims(list(drafts)))
    return make_envelope(data, user=user, time=at, id=eid, producer="test")


def test_the_core_decides_relations_seals_its_state_and_redecides_a_reread_identically():
    keys = StaticKeys()
    core = sealed_core(keys)
    first = claims_event("alice", [RelationDraft(USER, "sister", ANA)], T0)
    second = claims_event("alice", [RelationDraft(SHE, "lives_in", place("Rome"))], T0 + timedelta(minutes=1))
    # the claims travel sealed and decode back (the names are personal)
    raw = encode(second, keys)
    assert b"Rome" not in raw
    second = decode(raw, keys)
    out1 = list(core.on_fact(first))
    saved = dict(core.states)
    out2 = list(core.on_fact(second))
    assert [o.envelope.type for o in out1 + out2] == ["entity.observed", "relation.asserted",
                                                       "entity.observed", "relation.asserted"]
    assert all(b"Ana" not in blob for blob in core.states.values())   # state sealed too
    # a crash after sending but before saving: the input is read again from the old state, same events
    core.states.clear()
    core.states.update(saved)
    assert summary(core.on_fact(second)) == summary(out2)
    # a second delivery after the save teaches nothing new
    assert list(core.on_fact(second)) == []
    # what-if's plain core decides the same
    plain = plain_core(keys)
    assert summary(plain.on_fact(first)) + summary(plain.on_fact(second)) == summary(out1) + summary(out2)


def test_relation_claims_leave_out_what_the_contract_refuses_never_the_turn():
    long_name = Mention("person", name="x" * 300, role="friend")
    kept = relation_claims([RelationDraft(USER, "friend", long_name), RelationDraft(USER, "sister", ANA),
                            RelationDraft(USER, "Not A Predicate", ANA)])
    assert [(c.predicate, c.object.name) for c in kept] == [("sister", "Ana")]


def test_a_question_names_roles_in_english_and_chinese():
    from query.people import roles_in
    assert roles_in("Where does my sister live?") == ["sister"]
    assert roles_in("What did the user's Mom say about my brothers?") == ["mother", "brother"]
    assert roles_in("我妈妈住在哪里？") == ["mother"]
    assert roles_in("Where do sisters usually live?") == []   # no one of the user's
