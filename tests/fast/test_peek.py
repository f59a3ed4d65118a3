"""schemas/peek.py: the one way to see a raw record's type or clear envelope without decoding it."""
from schemas.peek import peek, peek_type


def test_the_type_is_found_in_the_encoders_layout_and_in_any_other():
    assert peek_type(b'{"id":"x","type":"memory.created","v":1}') == "memory.created"
    assert peek_type(b'{"v": 1, "id": "x", "type": "decay.ticked"}') == "decay.ticked"   # not the encoder's layout


def test_what_has_no_type_says_none_and_never_raises():
    for raw in (None, b"", b"\x00garbage", b"[1,2]", b'{"type": 3}', b'{"id":"x"}'):
        assert peek_type(raw) is None
    assert peek(b"\x00garbage") == {} and peek(b"[1]") == {} and peek(b'{"a":1}') == {"a": 1}
