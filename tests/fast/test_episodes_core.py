"""Episodes without services: which session messages an episode tells, when its content is worth
a memory, which sessions are idle (domain/sessions.py). Summaries on the real pipeline:
tests/test_episodes.py."""
from __future__ import annotations

from domain.sessions import SessionState, episode_content, idle_sessions, tell, untold


def msgs(*texts, role="user", start=0.0):
    return [[start + i, f"id{start + i:08.1f}", role, t] for i, t in enumerate(texts)]


def test_an_episode_tells_each_message_once():
    state = SessionState()
    first = msgs("I went hiking", "it rained")
    assert untold(state, first) == first
    assert tell(state, first) == 1
    assert untold(state, first) == []
    later = first + msgs("we saw a deer", start=10.0)
    assert untold(state, later) == later[2:]
    assert tell(state, later[2:]) == 2
    # the state survives its serialised form, old states (without episode fields) load too
    again = SessionState.from_dict(state.to_dict())
    assert again.episode_through == state.episode_through and again.episodes == 2
    old = {k: v for k, v in state.to_dict().items() if k not in ("episode_through", "episodes")}
    assert SessionState.from_dict(old).episodes == 0


def test_episode_content_needs_the_user_to_have_said_something():
    assert episode_content("2026-05-08", msgs("hello, how can I help?", role="assistant"), 600) is None
    text = episode_content("2026-05-08", msgs("I adopted a cat. She is called Miso") + msgs("Lovely!", role="assistant", start=5), 600)
    # the user's lines in the third person; the assistant's left out (not something the user told)
    assert text == "Conversation on 2026-05-08: User adopted a cat. She is called Miso"
    zh = episode_content("2026-05-08", msgs("我们去了杭州，我很喜欢") + msgs("你去过西湖吗？", role="assistant", start=5), 600)
    assert zh == "Conversation on 2026-05-08: 用户和其他人去了杭州，用户很喜欢"
    assert len(episode_content("2026-05-08", msgs(*["word " * 40] * 30), 200)) == 200


def test_idle_sessions_are_the_others_quiet_for_long_enough():
    open_sessions = {"a": 0.0, "b": 3000.0, "c": 100.0}
    assert idle_sessions(open_sessions, "c", 3600.0, 1800.0) == ["a"]
    assert idle_sessions(open_sessions, "a", 1000.0, 1800.0) == []
