"""Does a statement name what it speaks of? (issue 30, item 5: "a statement whose meaning cannot be
recovered is not stored").

A memory is read later by an agent with no conversation at hand. "It brings User so much
happiness", "User has been waiting for this for a long time", "User is planning a trip there" say
nothing alone: their subject or object is a word that points at something, and nothing in the
memory is what it points at. `unresolved` finds such a word in a third-person English statement
(as statements.third_person_en writes them) and says which; the statement channel first tries to
read the statement with what it points at (the sentence before, the question it answers), and does
not store one that still names nothing.

What is not a pointing word:
- a dummy "it" ("It's great to see …", "it's been a while", "make it happen", "It takes courage to …");
- "that" opening a clause ("User thinks that …", "the book that changed …", "so that", "now that");
- a demonstrative with its noun ("this necklace", "those shoes"; judging whether the noun says
  enough is left to a reader);
- "there is/are …" (existential), and "there" after a place the statement names;
- he/she/they/him/her after a person or group the statement names ("User's sister … she …",
  "Jean … her").
"them"/"their"/"themselves" are never judged: third_person_en writes them for the user's own
"me/my/myself" once "User" is named, so they are as often the user as someone else.

Pure and English only (a Chinese statement is left to its own channel's rules).
"""
from __future__ import annotations

import re

from domain.text import STOP

# Something a later pronoun may stand for, in the statement before it: a determiner with its noun,
# a name (a capitalised word that does not open a sentence, nor "User"), a quoted title, or a
# relation that is a person or a group.
_NOUN_PHRASE = re.compile(
    r"\b(?:[Aa]|[Aa]n|[Tt]he|[Ss]ome|[Aa]ny|[Aa]nother|User's|[Tt]heir|[Hh]is|[Hh]er|[Oo]ur|[Ii]ts|[Tt]his|[Tt]hat|"
    r"[Tt]hese|[Tt]hose|[Ee]very|[Ee]ach|[Oo]ne|[Tt]wo|[Tt]hree|[Mm]any|[Ss]everal|[Ff]ew|[Aa]ll|[Bb]oth|[Nn]o)\s+"
    r"(?:[a-z][\w'-]*\s+){0,2}[a-z][\w'-]{2,}|"
    r"(?<![.!?]\s)(?<!^)(?<!\()\b(?!User\b|I\b|It\b|This\b|That\b|They\b|He\b|She\b)[A-Z][\w'-]+|"
    r"\"[^\"]{2,}\"|"
    r"\b(?:[a-z]{3,}(?:ies|es|s))(?:[.,;!]|,?\s+(?=(?:is|are|was|were|that|who|which|and|with|from|at|in|on|of)\b))|"
    # an activity named by its gerund: "User started surfing and it's been great"
    r"\b(?:started|start|starts|love|loves|loved|enjoy|enjoys|enjoyed|tried|try|took up|began|begun|"
    r"keep|kept|quit|stopped|finished|practice|practiced|like|likes|liked)\s+[a-z]{2,}ing\b")
_PERSON = re.compile(
    r"(?i)\b(?:mom|mother|mum|dad|father|parents?|brother|sister|siblings?|son|daughter|kids?|children|child|"
    r"husband|wife|partner|spouse|friends?|buddy|pal|family|grandma|grandpa|grandmother|grandfather|"
    r"grandparents?|aunt|uncle|cousins?|nephew|niece|boss|coworkers?|co-workers?|colleagues?|neighbou?rs?|"
    r"team|teammates?|people|students?|clients?|customers?|fans?|pets?|dogs?|cats?|puppy|puppies|kitten|"
    r"group|community|members?|folks|boyfriend|girlfriend|fianc[ée]e?|baby|babies|guys|everyone|everybody|"
    r"others|teachers?|doctors?|nurse|artists?|mentors?|coach|crowd|audience|band|players?|volunteers?|"
    r"veterans?|kids|instructors?|woman|women|man|men|girl|girls|boy|boys|lady|ladies|guy|someone|somebody|"
    r"couple|staff|owner|writer|author|producers?|actors?|singer|leaders?|officials?|residents?|"
    r"User and others)\b")
_PLACE = re.compile(r"\b(?:in|at|to|from|near|around|visit(?:ed|ing)?)\s+(?:(?:the|a|User's|their)\s+(?:[a-z]+\s+){0,2}"
                    r"[a-z]{3,}|[A-Z][\w'-]+)")

# "It's great to …", "It was so special having …", "it's been a while", "It takes courage to …"
_DUMMY_IT = re.compile(
    r"\bit(?:'s| is| was| has been| had been| will be| would be| can be| could be| must be| might be|'ll be|'d be)"
    r"\s+(?:(?:so|really|very|such|pretty|super|quite|truly|always|just|also|never|not|a|an|the|too|kind of|"
    r"sort of|totally|definitely|still|even)\s+)*(?:[\w-]+\s+){0,2}?(?:to|that|for|when|how|if|whether|"
    r"seeing|being|having|knowing|watching|getting|hearing|finding|doing|making|going|learning|sharing|"
    r"taking|working|spending|talking|reading|writing)\b|"
    r"\bit(?:'s| is| has been| was)\s+(?:been\s+)?(?:a while|ages|years|months|weeks|time|a long time|"
    r"about time|like)\b|"
    r"\bit(?:'s| is| was| has been| had been)\s+(?:(?:really|just|also|still|definitely|actually|such)\s+)?"
    r"(?:(?:a|an|one of)\b|(?-i:[A-Z]))|"
    r"\bit\s+(?:takes|took|feels|felt|seems|seemed|looks|looked|sounds|sounded)\s+(?:[\w-]+\s+){0,3}?"
    r"(?:to|that|like|as if|when)\b|"
    r"\b(?:make|makes|made|making)\s+it\s+(?:happen|work|through|to|out|big|count|last)\b|"
    r"\b(?:made|make|makes|making)\s+it\b(?=\s*(?:$|[,.;!]))|"
    r"\b(?:take|takes|took|taking)\s+it\s+(?:easy|slow|one day|day by day|step by step)\b|"
    r"\b(?:go|went|going)\s+for\s+it\b|\bthat's\s+it\b|\bas\s+it\s+(?:is|was|were)\b|"
    r"\b(?:love|loved|loves|hate|hated|hates)\s+it\s+when\b|\bhow(?:'s| is| was| has) it (?:been )?going\b|\bit\s+all\s+(?:started|began)\b", re.I)
_IT = re.compile(r"(?i)\b(?:it|its)\b")
# A bare demonstrative: not followed by its noun (the next word is a verb, a preposition, an
# adverb, punctuation, or nothing).
_BARE_DEMONSTRATIVE = re.compile(
    r"(?i)\b(?:this|these|those)\b(?=\s*(?:$|[,.;:!?)-])|\s+(?:is|was|are|were|'s|has|had|have|will|would|can|could|"
    r"made|makes|make|helped|helps|help|gave|gives|give|brought|brings|keeps|kept|means|meant|reminds|reminded|"
    r"feels|felt|looks|looked|got|gets|took|takes|too|again|out|up|for|to|with|in|on|at|about|so|and|but|"
    r"because|when|if|as|one|ones|lately|now|next|more|much|all|really|just|always|never|also|still|already|"
    r"yet|soon|before|after|every|together|here|there|back)\b)")
# "that" as a pointing word: opening the statement or a clause of it and followed by its verb
# ("That was amazing", "… , that's why"), or the object at the end of a clause ("User will look
# into that", "User wants their kids to learn that too") — never "that" opening a clause.
_THAT = re.compile(
    r"(?i)(?:^|[,;:-]\s*|\.\s+|\band\s+|\bbut\s+|\bso\s+)that(?:'s|\s+(?:is|was|has|had|will|would|made|makes|"
    r"gave|gives|helped|helps|means|meant|reminds|reminded|feels|felt|sounds|looks|really|just|also|always|"
    r"definitely|one))\b|"
    r"\b(?:do|did|does|try|tried|learn|learned|share|shared|remember|love|loved|like|liked|want|wanted|need|"
    r"needed|see|saw|check|checked|look\s+into|into|about|like|with|for|of|at|on|through|after|from|"
    r"without)\s+that\b(?=\s*(?:$|[,.;:!?)-])|\s+(?:one|too|again|anymore|yet|already|before|later|soon|now|"
    r"out|up|more|much|a lot|lol|haha|either)\b)")
_THERE = re.compile(r"(?i)\bthere\b")
_THERE_EXISTENTIAL = re.compile(r"\bthere(?:'s|'re| is| are| was| were| will| would| has| have| had| be| been|"
                                r"'ll| seems| seem| must| might| may| might| could| can)\b|"
                                r"\b(?:out there|over there|here and there|there you go|get there|got there|"
                                r"getting there|there for|be there|been there|is there|was there|were there|"
                                r"are there)\b", re.I)
# Words that say nothing of what happened: intensifiers, feelings about it, fillers
_LIGHT = frozenset("so too really very just also even still always never ever cool great awesome amazing nice good "
                   "super pretty lot lots much thing things stuff way gonna wanna kinda yeah oh well sure like fun "
                   "wow bad glad happy excited thankful grateful feel feels felt user user's and or but others has have had "
                   "will would can could should might must going got get gets been being".split())
# "Her name is Shadow", "His name's Max": the clause names who
_NAMED_HERE = re.compile(r"(?i)(?:his|her|their)\s+names?(?:'s|\s+is|\s+was|\s+are)\s+(?-i:[A-Z])")
# ("Their" only opening the statement: later, third_person_en writes "their" for the user's "my")
_THIRD = re.compile(r"(?i)\b(?:he|she|him|his|her|hers|they|they're|they've|they'll|he's|she's)\b|^Their\b")
# A question that points with the same word names nothing for it ("They signed it … (in reply to:
# Did they sign it for a special reason?)")
_SAME_WORD = {"it": r"\b(?:it|its)\b", "this": r"\b(?:this|these|those)\b", "that": r"\bthat\b",
              "there": r"\bthere\b", "person": r"\b(?:he|she|him|his|her|they|them|their)\b"}


def _prefix_names(prefix: str, person: bool = False) -> bool:
    """Does the statement up to a pointing word say something it may stand for? A noun phrase ("a
    new bike", "User's sister", "Jean"), or a clause of its own: two words that carry content
    besides the user ("User injured themselves not long ago. It sucked …", "Searching for
    investors has been tough. It's all a process": the situation is what "it" is). "User painted
    it", "User felt it", "It brings …" say nothing before it."""
    if person and _PERSON.search(prefix):      # "User's sister … she", "the magazine … they"
        return True
    return bool(_NOUN_PHRASE.search(prefix)) or _content_words(prefix) >= _MIN_CLAUSE_WORDS


# Content words before a pointing word that make a clause it may stand for. Requiring a noun
# phrase instead (∞) was tried: 43 more of the LoCoMo memories take a context or fold into a
# neighbour, mostly situations that read well already ("… passed away and it's been really hard").
_MIN_CLAUSE_WORDS = 2


def _content_words(prefix: str) -> int:
    """Words that carry content, past the user's own verb ("User has been waiting for" has none)."""
    words = [w for w in re.findall(r"[a-z][a-z'-]+", prefix.lower()) if w not in STOP and w not in _LIGHT]
    return max(len(words) - 1, 0) if prefix.startswith("User") else len(words)


def unresolved(content: str) -> str | None:
    """The first word of `content` that points at something the statement does not name ("it",
    "this", "that", "there", "she", …), or None: the statement names what it speaks of. A trailing
    resolved date counts as part of the statement, and an "(in reply to: …)" question or a
    "(context: …)" sentence of its turn may name what "it" is."""
    text = content.replace("’", "'")
    contexts = list(_CONTEXT.finditer(text))
    if contexts:    # the statement itself; what it replies to, or its turn's context, may name what it means
        text = text[:contexts[0].start()]
    scrubbed = _DUMMY_IT.sub(lambda m: "~" * len(m.group(0)), text)
    scrubbed = _THERE_EXISTENTIAL.sub(lambda m: "~" * len(m.group(0)), scrubbed)
    found: list[tuple[int, str, str]] = []
    for pattern, kind in ((_IT, "it"), (_BARE_DEMONSTRATIVE, "this"), (_THAT, "that"), (_THERE, "there"),
                          (_THIRD, "person")):
        for m in pattern.finditer(scrubbed):
            word = m.group(0).strip(" ,;:-.").split()[-1] if kind == "that" else m.group(0)
            at = m.start() if kind != "that" else m.start() + m.group(0).lower().rfind("that")
            prefix = text[:at]
            if kind == "person":
                if _prefix_names(prefix, person=True) or _NAMED_HERE.match(text, m.start()):
                    continue
            elif kind == "there":
                if _PLACE.search(prefix) or re.search(r"(?<![.!?]\s)(?<!^)\b(?!User\b)[A-Z][a-z]+", prefix):
                    continue
            elif _prefix_names(prefix):
                continue
            found.append((at, word if kind != "that" else "that", kind))
            break
    if not found:
        return None
    _, word, kind = min(found)
    if any((_NOUN_PHRASE.search(c.group(1)) or _PERSON.search(c.group(1))) and
           not re.search(_SAME_WORD[kind], _DUMMY_IT.sub(" ", c.group(1)), re.I) for c in contexts):
        return None     # the question it answers (or its turn's sentence) names something it may stand for
    return word


_CONTEXT = re.compile(r" ?\((?:in reply to|context): ([^()]*)\)")
