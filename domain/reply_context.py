"""What a reply points at (issue 30, item 5): the other speaker's question, kept with a statement
whose subject or object lives only in that question.

From raw conversation about a third of the offline memories were fragments, most of them replies
whose "it", "that" or "they" named something the *other* speaker had just asked about:

    assistant: "Thanks! How's it going with yoga? Have you noticed any improvements?"
    user:      "It's helped me a lot with strength and flexibility."

"User has been helped by it" means nothing alone. An offline extractor cannot resolve the
pronoun reliably, but it can keep what a note-taker would write down beside it: the question it
answers, in the user's frame — "It's helped User a lot with strength and flexibility (in reply
to: How's it going with yoga? Has User noticed any improvements?)". The question names the
referent often enough, and it also carries the words a later question is likely to use.

When the other speaker asked nothing, the reply's "it" most often leans on what they remarked
("Color-coding is a great way to track your progress!" → "It keeps User going"): their first
sentence that names something stands in for the question (`reply_remark`), never their talk
(thanks, praise of what they heard, words to the user by name) and never what they say of
themselves (their "I" is not the user).

Pure functions: `reply_pointer` reads the other speaker's turn once (its question, else its
remark; the extractor keeps the result, never the turn), `points_back` says whether a
third-person statement needs it, and `with_reply` writes it in before a trailing resolved date.
"""
from __future__ import annotations

import re

from domain.text import STOP, tokens

MAX_QUESTION_CHARS = 160   # a question longer than this is a paragraph, not a pointer
MAX_QUESTIONS = 2          # the last two questions of the turn (the referent is often in the first)

_QUESTION = re.compile(r"[^.!?\n]*\?")
_LEAD = re.compile(r"^(?:[\s\W]*(?:and|but|so|also|oh|wow|hey|hi|ok|okay|well)\b[\s,]*)+", re.I)
# The other speaker speaking of themselves: their "I" is not the user, and rewriting it is guessing.
_SPEAKER_FIRST = re.compile(r"(?i)\b(?:i|i'm|i've|i'll|i'd|me|my|mine|myself)\b")
_SECOND = [
    (re.compile(r"(?i)\b(are|were|have|do|did|can|could|will|would|should|had)\s+you\b"),
     lambda m: {"are": "is", "were": "was", "have": "has", "do": "does"}.get(m.group(1).lower(), m.group(1)) + " User"),
    (re.compile(r"(?i)\byou're\b"), lambda m: "User is"),
    (re.compile(r"(?i)\byou've\b"), lambda m: "User has"),
    (re.compile(r"(?i)\byou'll\b"), lambda m: "User will"),
    (re.compile(r"(?i)\byou'd\b"), lambda m: "User would"),
    (re.compile(r"(?i)\byourself\b"), lambda m: "themselves"),
    (re.compile(r"(?i)\byours\b"), lambda m: "User's"),
    (re.compile(r"(?i)\byour\b"), lambda m: "User's"),
    (re.compile(r"(?i)\byou\b"), lambda m: "User"),
]

# A third-person statement that opens on what the other speaker named ("It's helped …", "That was
# …", "They signed it …") or takes it as a bare object right after the user's verb ("User painted it
# because …", "User will remember them …").
_OPENS_ON_IT = re.compile(r"^(?:It|It's|They|They're|They've|They'll|He|He's|She|She's|Those|These|"
                          r"(?:This|That)(?:'s)?(?=\s+(?:is|was|has|had|will|would|can|could|really|always|just|"
                          r"also|still|never|made|makes|gave|gives|helps|helped|keeps|kept|brings|brought|means|"
                          r"meant|reminds|reminded|feels|felt|sounds|looks)\b|'s\b)|"
                          # those present at what was just told ("Everyone was so happy" after the
                          # parade; not "Everyone in my family …", which says who), moments and
                          # some of those it named
                          r"(?:Everyone|Everybody)(?=\s+(?:was|were|is|are|got|had|has|loved|loves|seemed|"
                          r"looked|cheered|clapped|enjoyed|came|showed|brought|danced|laughed|said)\b)|"
                          r"(?:Moments|Times|Days|Nights) like (?:this|that|these|those)|"
                          r"(?:Some|Most|All|Both|None|One|Many|A few) of (?:them|those|these))\b")
# "it" within four words of the subject; "them" within three, and never after a verb that takes the
# user as its object ("art lets them", "it made them feel": statements.third_person_en writes "them"
# for "me" once "User" is named). Idioms ("make it happen", "made it to the top") are kept in: the
# question they answer is what says what "it" was.
_NOT_BEFORE = r"(?!(?:a|an|the|some|User's|their|this|that|these|those)\b)"
_CAUSATIVE = (r"let|lets|make|makes|made|help|helps|helped|give|gives|gave|show|shows|showed|remind|reminds|"
              r"reminded|keep|keeps|kept|tell|tells|told|ask|asks|asked|bring|brings|brought|take|takes|took")
_BARE_OBJECT = re.compile(
    r"^User(?:'s)?(?:\s+" + _NOT_BEFORE + r"[a-z'-]+){1,4}?\s+it\b|"
    # "User loves his tech": someone the statement does not name (not "User's sister and her …")
    r"^User(?:\s+(?!(?:and|with|or|of|to|for)\b)[a-z'-]+){1,3}?\s+(?:his|him|her)\b|"
    r"^User(?:'s)?(?:\s+" + _NOT_BEFORE + r"[a-z'-]+){0,2}?\s+(?!(?:" + _CAUSATIVE + r")\b)[a-z'-]+\s+them\b")
_DATE_SUFFIX = re.compile(r" \((?:on|in|week of|weekend of) [^()]*\)$")


def reply_question(other_turn: str | None) -> str | None:
    """The question(s) the other speaker's turn ends its asking on, in the user's frame ("you" →
    User), or None: no question, or only ones about the speaker themselves ("Did I tell you …")."""
    if not other_turn or "?" not in other_turn:
        return None
    kept: list[str] = []
    for q in reversed(_QUESTION.findall(other_turn[:4000])):
        q = _LEAD.sub("", q.strip()).strip()
        if not q or len(q) > MAX_QUESTION_CHARS or len(q.split()) < 3 or _SPEAKER_FIRST.search(q):
            continue
        for pattern, repl in _SECOND:
            q = pattern.sub(repl, q)
        kept.append(q[0].upper() + q[1:])
        if len(kept) == MAX_QUESTIONS:
            break
    return " ".join(reversed(kept)) or None


_SENTENCE = re.compile(r"[^.!?\n]+[.!]*")
# What the other speaker says that is talk, not a topic: praise of what they heard, thanks, wishes
_REMARK_FILLER = re.compile(r"(?i)\b(?:to hear|sounds?|sounded|congrat\w*|glad|happy for|proud of|keep (?:it|that) up|"
                            r"good luck|take care|thanks|thank you|no worries|you got this|hang in there|"
                            r"love (?:that|this|it)|i bet)\b")
MIN_REMARK_WORDS = 4
# A remark needs this many words that name something: praise and intensifiers name nothing
# ("That's a great pic!", "Such a special moment", "It must be really awesome!")
MIN_REMARK_NAMING_WORDS = 2
_PRAISE = frozenset("great awesome amazing cool nice sweet beautiful incredible breathtaking special kind best good fun "
                    "wonderful lovely cute adorable fantastic gorgeous stunning impressive inspiring touching "
                    "really so such must totally super very pretty way go looks look seems what how that's it's "
                    "must've user user's aw aww wow dang oh yeah yes".split())
_VOCATIVE = re.compile(r"(?:^|,\s*)[A-Z][a-z]+(?:\s*[,!.]|$)|\b[A-Z][a-z]+!$")


def reply_remark(other_turn: str | None) -> str | None:
    """When the other speaker asked nothing, what they spoke of: their first sentence that names
    something, in the user's frame ("That themed tree looks amazing!", "Running can really boost
    User's mood"), for a reply whose "it" or "that" leans on it. None: only talk (thanks, praise of
    what they heard), only sentences about themselves (their "I" is not the user), or nothing."""
    if not other_turn:
        return None
    for sentence in _SENTENCE.findall(other_turn[:4000]):
        s = _LEAD.sub("", sentence.strip()).strip()
        if (len(s.split()) < MIN_REMARK_WORDS or len(s) > MAX_QUESTION_CHARS or _SPEAKER_FIRST.search(s)
                or _REMARK_FILLER.search(s) or _VOCATIVE.search(s)):
            continue
        naming = [w for w in tokens(s) if w not in STOP and w not in _PRAISE]
        if len(naming) < MIN_REMARK_NAMING_WORDS:
            continue
        for pattern, repl in _SECOND:
            s = pattern.sub(repl, s)
        return s[0].upper() + s[1:].rstrip(".")
    return None


def reply_pointer(other_turn: str | None) -> str | None:
    """What a reply to `other_turn` may lean on: its question(s) if it asks, else its remark."""
    return reply_question(other_turn) or reply_remark(other_turn)


# A verb whose object was left in the sentence before: a preposition straight before how long it
# lasted ("User has been working on for a while")
_OBJECT_BEFORE = re.compile(r"\b(?:on|about|at|with|into|towards?|after)\s+(?:for|since)\s+(?:a|an|the|ages|years|"
                            r"months|weeks|days|so|quite|some|long|over)\b")
# _BARE_OBJECT's "User … it" where something else opened the statement, the "it" ending it (before
# a resolved date): "At dance class with friends User felt it"
_ENDS_ON_IT = re.compile(r"\bUser(?:\s+" + _NOT_BEFORE + r"[a-z'-]+){1,3}?\s+it(?=\s*(?:\(|$))")


# A bare "this" or "that" as the object of the user's verb, naming nothing itself: "User will make
# sure to remember this", "User has been waiting for this for a long time", "User might check that
# one out" (not "User thinks that it …", where "that" opens a clause, nor "this book")
_BARE_DEMONSTRATIVE = re.compile(
    r"\bUser(?:\s+" + _NOT_BEFORE + r"[a-z'-]+){1,5}?\s+(?:this|that)(?:\s+one)?(?=\s*(?:\(|$|[,.;!-])|"
    r"\s+(?:again|too|for|at|in|on|with|when|because|now|so|anymore|yet|already|ever|soon|before|today|tonight|out|"
    r"up|back|every|all|more|much|a lot|lol|haha)\b)")

# A gerund whose object it does not name opens the statement: "Playing it helps User …", "Having
# them around brings User joy"
_GERUND_ON_IT = re.compile(r"^[A-Z][a-z]+ing\s+(?:it|them)\b")


def points_back(content: str) -> bool:
    """Does this third-person statement lean on something it does not name?"""
    return any(p.match(content) for p in (_OPENS_ON_IT, _BARE_OBJECT, _GERUND_ON_IT)) or \
        any(p.search(content) for p in (_OBJECT_BEFORE, _ENDS_ON_IT, _BARE_DEMONSTRATIVE))


def with_reply(content: str, question: str, limit: int, label: str = "in reply to") -> str:
    """`content` with the question it answers (or, `label` "context", a sentence of its own turn that
    names what it speaks of), before its resolved date; unchanged past `limit`."""
    date = _DATE_SUFFIX.search(content)
    head, tail = (content[:date.start()], date.group(0)) if date else (content, "")
    out = f"{head} ({label}: {question}){tail}"
    return out if len(out) <= limit else content
