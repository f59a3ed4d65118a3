"""The statement channel of offline extraction: every sentence worth keeping, without an LLM.

The rule channel (extraction.py) fills preference slots (name, location, likes, constraints).
Most of what people say about themselves fits no slot: "I'm a nurse and I work night shifts",
"Last week I adopted a cat named Miso", "我下个月要去东京出差". This channel keeps each such
sentence as a fact in the third person ("User is a nurse and works night shifts"), with:

- a kind (occupation, health, relationship, possession, plan, event, opinion, feeling, …) that
  picks the category and base importance (classification.STATEMENT_KINDS) and is the slot_hint;
- tags: the entities it names (capitalised names, quoted titles, the nouns that made its kind);
- an event date when it names a relative one ("last week", "two days ago", "上周", "下个月"),
  resolved against the turn's own time `at` (law 2: never the clock), written into the content
  ("(week of 2026-11-23)") and into FactDraft.event_date.

What is not worth keeping yields nothing: questions, greetings, thanks, acknowledgements,
encouragement aimed at the other person, sentences that say nothing about the speaker, and
first-person filler too short to carry a fact ("I will!", "I loved it!").

Pure and bounded: the text examined is capped (extraction.MAX_CHARS, cut at a word boundary), at
most MAX_SENTENCES sentences are looked at and MAX_STATEMENTS kept, every pattern is linear
(character classes with fixed alternatives, no nested unbounded repetition), and each kind's
pattern runs only when the sentence holds a word it needs (a set lookup). No turn costs more than
a few milliseconds whatever its length (bench/extraction_offline.py measures it).

Decisions: no Chinese segmenter (jieba builds its dictionary on first use, a start-up cost that
would land on one turn, and no word split is needed to keep a whole sentence as the fact); Chinese
tags come from names after 叫, places after 去/到/住在, and a small vocabulary. Relative dates are
resolved by hand for a bounded set of phrases (text.relative_dates) instead of a date parser.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from domain.classification import STATEMENT_KINDS, classify_rules
from domain.drafts import FactDraft, bounded
from domain.references import unresolved
from domain.reply_context import points_back, with_reply
from domain.text import STOP, RelativeDate, relative_dates

log = logging.getLogger("memstream.statements")

MAX_SENTENCE_CHARS = 400   # a longer "sentence" (no punctuation) is cut here before it is examined
MAX_CONTENT_CHARS = 300    # content sentences longer than this are cut at a word boundary
MAX_STATEMENTS = 12        # per turn: a wall of text does not become a wall of memories
REPLY_SENTENCES = 3        # a statement among a turn's first sentences may answer the other speaker's question
MAX_SENTENCES = 64         # sentences examined per turn ("a.a.a.…" is 2,000 sentences in MAX_CHARS)
MAX_TAGS = 8

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

# -- sentences --------------------------------------------------------------------------------
# A sentence runs to . ! ? 。 ！ ？ … or a newline ("; they keep me going" stays with what it explains);
# "3.5", "main.py", "Mr." and "Dr." do not end one.
_END = ".!?。！？…\n\u2600-\u27bf\U0001f300-\U0001faff"       # punctuation, newline, emoji
_SENTENCE = re.compile(
    r"[^" + _END + r"]+(?:(?:\.(?=\w)|(?<=\b[A-Z])\.(?=\s?[A-Z]\.|\s[A-Z][a-z]+\b(?![.!?]))|(?<=\bMr)\.|(?<=\bMs)\.|(?<=\bDr)\.|(?<=\bSt)\.|(?<=\bMrs)\.|(?<=\bvs)\.)"
    r"[^" + _END + r"]*)*[" + _END.replace("\n", "") + r"]*")

# -- English ----------------------------------------------------------------------------------
_INTERJ = (r"hey|hi|hello|heya|yo|wow|whoa|woah|oh|ooh|aww|aw|ah|yeah|yes|yep|yup|yea|ya|ok|okay|sure|well|so|"
           r"and|but|also|actually|honestly|haha+|hehe+|lol|hmm+|um+|uh+|totally|absolutely|definitely|thanks|"
           r"thank you|thx|by the way|btw|on another note|on a different note|anyways?|plus|true|right|exactly|"
           r"man|dude|omg|gosh|sorry|great|awesome|cool|nice|congrats|congratulations|good|alright|all right|"
           r"no worries|no way|of course|oh yeah|oh man|speaking of which|funny you ask|guess what|you know what|"
           r"to be honest|tbh|as for me|for me|since we (?:last )?(?:spoke|talked|chatted|caught up)(?: last)?|"
           r"don't worry|no prob|no problem|for sure|you bet|sure thing|sounds good|"
           r"good idea|great idea|you won't believe it|you know|believe it or not|long time no (?:see|talk)|"
           r"so far,? so good|cheers|trust me|fyi|anyway|oh well|ugh|phew|woohoo|yay|hah|ha|"
           r"congrats on [^,!.?]{0,40}|congratulations on [^,!.?]{0,40}|quite a (?:week|day|month|year)|"
           r"(?:please )?remember(?: that)?|(?:please )?note(?: that)?|just so you know|for the record|"
           r"keep in mind(?: that)?|just a heads up|heads up|(?:a lot|so much|much|lots|quite a bit)(?:'s| has) "
           r"(?:happened|been going on|been happening|changed)(?: since we (?:last )?(?:talked|spoke|chatted|"
           r"caught up)(?: last)?)?")


def _top_level(alternation: str) -> list[str]:
    """The alternatives of a pattern at parenthesis depth 0 ("a|b(?:c|d)" → ["a", "b(?:c|d)"])."""
    out: list[str]
    cur: list[str]
    out, depth, cur = [], 0, []
    for ch in alternation:
        if ch == "|" and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        depth += (ch == "(") - (ch == ")")
        cur.append(ch)
    out.append("".join(cur))
    return out


# Longest first: the engine takes the first alternative that fits ("so far, so good" before "so").
_INTERJ = "|".join(sorted(_top_level(_INTERJ), key=len, reverse=True))
# Leading interjections and a vocative name: "Hey Caroline, I …", "Thanks, Mel - I …".
_LEAD_EN = re.compile(r"^(?:(?i:" + _INTERJ + r")\b(?:\s+(?i:so much|a lot|a bunch))?[\s,!.:;~-]*"
                      r"(?:[A-Z][a-z]+(?:\s[A-Z][a-z]+)?\s*[,!:-]+\s*)?)+")
# A subject left out in chat: "Just got some new shoes", "Gonna continue my edu".
def _strip_lead(body: str) -> str:
    m = _LEAD_EN.match(body)
    return (body[m.end():] if m else body).strip(" ,-:;")


# Chat spelling without apostrophes ("im a nurse", "i dont eat meat").
_CONTRACTIONS = {"im": "I'm", "ive": "I've", "dont": "don't", "cant": "can't", "didnt": "didn't", "doesnt": "doesn't",
                 "isnt": "isn't", "wasnt": "wasn't", "havent": "haven't", "ill": "I'll"}
_NO_APOSTROPHE = re.compile(r"(?i)\b(?:im|ive|dont|cant|didnt|doesnt|isnt|wasnt|havent)\b|\bill(?=\s+(?:be|go|try|have|do|get|"
                            r"make|see|take|start|call)\b)")
_CHAT_WORDS = frozenset(_CONTRACTIONS)
_CHAT_FP = frozenset({"im", "ive", "ill"})
_TRAILING_FILLER = re.compile(r"(?i)(?:[\s,!.]+(?:lol|lmao|haha+|hehe+|xd|:\)|:d|;\)))+$")
_TECH_WORDS = frozenset("code script deploy deployment build test tests server api command function query program app "
                        "database db docker pipeline request endpoint compile compiler install error errors exception "
                        "traceback bug crash crashes cli container cluster job migration service tool".split())
_DATE_AS_SUBJECT = re.compile(r"(?i)^(?:was|has been|is|will be)\b[^,;]{0,40}[,;]\s*(?=\S)")
_PREP_BEFORE = re.compile(r"(?i)\b(?:by|until|till|before|after|since|from)\s+$")
_TRAILING_VOCATIVE = re.compile(r",\s+([A-Z][a-z]+)$")
# A request to the assistant opens with a verb in the imperative (questions are already out).
_IMPERATIVE = re.compile(r"(?i)^(?:please\s+|pls\s+|now\s+|also\s+|then\s+)?(?:write|give|tell|help|make|show|translate|"
                         r"summari[sz]e|explain|list|find|create|generate|draft|fix|check|review|send|remind|suggest|"
                         r"recommend|describe|compare|calculate|schedule|add|remove|delete|update|set|put|read|rewrite|"
                         r"edit|convert|search|look up|book|order|call|email|text|answer|use|run|open|save|print|plot|"
                         r"draw|design|build|let me|let's|let us|can you|could you|would you|will you)\b")
_VOCATIVE = re.compile(r"([A-Z][a-z]+),\s+")
# Only forms that cannot open a sentence with a subject of their own: "Learning something new is
# fun" has one (a gerund), "Went hiking" does not.
_ELIDED = re.compile(r"^(?i:(just\s+|finally\s+|recently\s+)?(got|bought|finished|started|went|had|made|took|adopted|"
                     r"moved|visited|tried|joined|signed up|gonna|been(?!\s+(?:a|an|the|such|quite|so|"
                     r"ages|forever)\b)|planning to|planning on|planning a|off to|can't wait|cannot wait|"
                     # "Love this!" elides "I"; "Love is truly magical" is the noun
                     r"(?:love|enjoy|hate)(?!\s+(?:is|was|are|were|has|had|will|would|can|makes|made|keeps)\b)))\b")
_ELIDED_WORDS = frozenset("got bought finished started went had made took adopted moved visited tried joined signed "
                          "gonna going been planning off can't cannot love enjoy hate".split())
# First-person filler: agreement, politeness and encouragement, whatever follows.
_FILLER_START_EN = re.compile(
    r"(?i)^(?:let's|let us|let me (?:know|see|think)|hope you|i hope (?:you|it|that|things|everything|so)|"
    r"i wish you|i'm (?:so |really |very |super )?(?:happy|glad|sorry|proud|thrilled|stoked) (?:for|to hear|about you|that you|you)|"
    r"i (?:can't|cannot) wait to (?:see|hear|read|try)|i (?:totally |completely |really |fully |100% )?(?:agree|understand)|"
    r"i know(?: what you mean| right| how you feel| that feeling)?\b|i bet|i guess(?: so)?\b|i think so|"
    r"i hope so|i will(?:\s*$|[,!])|i won't(?:\s*$|[,!]| give up| quit| let you down| forget)|i see(?:\s*$|[,!])|i'll (?:keep that in mind|try|do that|let you know|check it out|think about it|keep you posted)|"
    r"i appreciate|i'd love to (?:see|hear|read)|i remember you|me too|same here|you're welcome|no worries|"
    r"no problem|i'm (?:here|always here) for you|i'm sure (?:you|it|they|that)|i can imagine|i can tell|i feel you|"
    r"i hear you|i get (?:it|that|you)|i got (?:it|this|that|you)\b|glad i could|happy i could|i'm in\b|count me in|i'm down\b|i can (?:\w+ )?imagine|here's|here is|here are|"
    r"check\b|look at (?:this|that)|take a look|i meant|i mean\b|"
    r"sounds like|seems like|looks like|been a\b)")
_FILLER_ANY_EN = re.compile(
    r"(?i)\b(?:thank you|thanks|talk (?:to you )?(?:soon|later)|catch (?:ya|you) later|see (?:ya|you)|take care|"
    r"good to (?:see|hear)|nice to (?:meet|see|hear)|glad to hear|happy for you|proud of you|sorry to hear|"
    r"means (?:a lot|so much) to me|mean (?:a lot|so much) to me|keep (?:it|that) up|you got this|we got this|"
    r"(?:get|got|make it) through (?:this|it)|we can do (?:this|it)|we'll make it|what i (?:like|love|wanted|needed) "
    r"to hear|keep (?:going|pushing|at it|trying|it up|working at it|pushing forward)|never give up|won't give up|"
    r"won't quit|check (?:it|them|that|this|those) out)\b")

_JOBS = ("nurse|doctor|physician|surgeon|dentist|pharmacist|paramedic|teacher|professor|lecturer|tutor|engineer|"
         "software engineer|developer|software developer|programmer|data scientist|scientist|researcher|designer|"
         "graphic designer|architect|lawyer|attorney|accountant|banker|consultant|analyst|manager|product manager|"
         "student|grad student|phd student|intern|artist|painter|writer|author|novelist|journalist|editor|"
         "photographer|filmmaker|musician|singer|dancer|actor|actress|chef|cook|baker|barista|bartender|waiter|"
         "waitress|cashier|pilot|driver|truck driver|firefighter|police officer|cop|soldier|veteran|farmer|"
         "mechanic|electrician|plumber|carpenter|contractor|librarian|counselor|counsellor|therapist|psychologist|"
         "social worker|coach|athlete|player|basketball player|entrepreneur|founder|ceo|freelancer|streamer|"
         "youtuber|gamer|realtor|secretary|receptionist|clerk|vet|veterinarian|caregiver|nanny|volunteer|"
         "retiree|stay-at-home mom|stay-at-home dad|homemaker|translator|pastor|priest|activist|instructor|"
         "trainer|personal trainer|sales rep|salesperson|marketer|ux designer|web developer|biologist|chemist")
_JOB = r"(?P<job>" + "|".join(sorted(_JOBS.split("|"), key=len, reverse=True)) + r")"
# The occupation slot (a new value supersedes the old): present tense only, "I worked as a nurse" is history.
_OCC_KEY = re.compile(r"(?i)\b(?:i'm|i am|i work as|i'm working as|i've been working as)\s+(?:an?\s+)?"
                      r"(?:(?:full-time|part-time|freelance|registered|senior|junior|lead|head|professional|retired|"
                      r"new|night|high school|elementary school|middle school|school|ER|ICU)\s+)?" + _JOB + r"s?\b")
# Vocabularies: words separated by spaces; "_" joins the words of a phrase ("guinea_pig").
_PETS_W = ("dog dogs cat cats pup pups puppy puppies kitten kittens kitty kitties pet pets parrot parrots hamster hamsters "
           "guinea_pig guinea_pigs goldfish fish horse horses pony ponies turtle turtles tortoise tortoises rabbit "
           "rabbits bunny bunnies snake snakes lizard lizards bird birds chicken chickens ferret ferrets gecko geckos")
_THINGS_W = ("car truck house home apartment flat condo bike motorcycle boat garden guitar piano violin drum_set drums "
             "laptop computer phone camera collection tattoo degree business shop studio cabin")
_RELATIONS_W = ("wife husband partner spouse son sons daughter daughters kid kids children child baby babies mom mum "
                "mother dad father parents brother brothers sister sisters sibling siblings grandma grandpa "
                "grandmother grandfather grandparents grandkids grandchildren aunt uncle cousin cousins nephew niece "
                "family friend friends best_friend bff boyfriend girlfriend fiance fiancee fiancé fiancée roommate "
                "roommates neighbor neighbors neighbour neighbours in-laws mother-in-law father-in-law twins mentor ex")


def _words(vocab: str) -> list[str]:
    return [w.replace("_", " ") for w in vocab.split()]


def _alt(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


_PETS = _alt(_words(_PETS_W))
_THINGS = _alt(_words(_THINGS_W))
_RELATIONS = _alt(_words(_RELATIONS_W))
_ADV = (r"really|also|just|still|usually|always|never|often|sometimes|actually|totally|absolutely|definitely|even|"
        r"only|finally|recently|generally|mostly|kinda|truly|currently|now|already|too|first|then|once|ever|"
        r"probably|almost|certainly|seriously|literally|basically|officially|all|both|"
        r"(?!(?:fly|apply|rely|reply|supply|multiply|ally|bully)\b)[a-z]+ly")
_IRREGULAR_PAST = frozenset(
    "went got took made had did saw came found gave told thought bought brought caught taught felt left kept met "
    "ran won lost began sang swam drank ate fell wrote rode drove flew grew knew threw wore tore spoke broke chose "
    "froze stole woke forgot built sent spent lent bent meant sat stood understood held heard paid said sold "
    "slept swept wept became overcame hid bit shot lit fought sought read led fed fled spun stuck struck hung "
    "dug quit shut cut hit put set let hurt cost split spread beat burnt learnt dreamt drew blew rang dove swore "
    "wove strove shook mistook forgave undertook withdrew arose awoke".split())
# Present forms that end like a past one ("I need" is not "I needed").
_PRESENT_ED = frozenset("need feed bleed breed speed heed proceed succeed exceed seed shed wed embed bed".split())
_ING_VERBS = frozenset("bring sing ring swing sting cling fling spring string wring sling".split())
# Past forms that are also present forms ("I let", "I put") do not make a sentence an event.
_PAST_ONLY = sorted(_IRREGULAR_PAST - frozenset("read quit shut cut hit put set let hurt cost split spread beat".split()))
_KIND_EN: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("health", re.compile(
        r"(?i)\b(?:allerg\w*|diagnos\w*|disease|illness|sick|injur\w*|hurt my|broke my (?!heart)|sprained|surgery|hospital\w*|"
        r"my doctor|medication|meds|prescri\w*|diabet\w*|asthma|cancer|tumou?r|pregnan\w*|depress\w*|anxiety|adhd|"
        r"autis\w*|migraines?|accident|blood pressure|vegetarian|vegan|gluten|lactose|intoleran\w*|recover\w*|"
        r"chronic|insomnia|covid|the flu|a fever|physical therapy|rehab|concussion|arthritis|allergies|"
        r"my (?:mental |physical )?health|struggled with (?:mental health|depression|anxiety))\b")),
    ("occupation", re.compile(
        r"(?i)\b(?:i work(?:ed)? (?:as|at|for|in|with|night|day|long|late|from home|remotely|full-time|part-time)\b|"
        r"i work$|i'm working (?:as|at|for|in)|careers?|jobs|night shifts?|day shifts?|my (?:job|career|boss|"
        r"manager|coworkers?|co-workers?|colleagues?|company|shifts?|clients?|students?|patients?|office|startup|"
        r"workplace|employer|internship|classes|degree|major|thesis|dissertation|promotion)|(?:a|new|the|first|dream|"
        r"part-time|full-time) job|i (?:teach|study|studied|founded) |i'm (?:studying|majoring|a (?:freshman|"
        r"sophomore|junior|senior)\b)|got (?:promoted|hired|fired|laid off)|quit my job|"
        r"(?:i'm|i am|i was|work(?:ed|ing)? as|i've been) (?:an?|the) (?:\w+ )?" + _JOB + r"|(?:my|our) (?:own |new |"
        r"little |\w+ )?(?:store|shop|business|restaurant|bakery|firm|practice|clinic|salon|brand|channel|podcast|"
        r"blog|studio|boutique|cafe|agency|clients|customers))\b")),
    ("age", re.compile(r"(?i)\b(?:i'm|i am|i turned|i just turned|i'll be|i will be) (?:\d{1,3})"
                       r"(?: years? old\b|\b)(?!\s*(?:%|percent|minutes?|mins|hours?|days?|weeks?|months?|times|miles|"
                       r"km|dollars|bucks|pounds|lbs|kg)|[.,:]\d)")),
    ("relationship", re.compile(
        r"(?i)\b(?:(?:got|am|i'm|we're|we got|are|were|just got|getting) (?:married|engaged|divorced|separated)|"
        r"(?:i'm|i am) (?:single|a (?:mom|mother|dad|father|parent|grandma|grandpa|widow|widower))|started dating|"
        r"(?:we've|we have) been (?:married|together|dating)|my (?:" + _RELATIONS + r") (?:is|was|and i are)\b|"
        r"(?:i have|i've got) (?:a|an|two|three|four|\d) (?:\w+ )?(?:" + _RELATIONS + r"))\b")),
    ("possession", re.compile(
        r"(?i)\b(?:(?:i|we|i've|we've)\s+(?:(?:just|recently|finally|also|even|now|still)\s+)?(?:have|own|got|bought|"
        r"adopted|rescued|purchased|inherited|have got)\s+(?:(?:a|an|two|three|four|five|some|another|"
        r"new|\d+|little|cute|big|small|old|beautiful|second|first|lovely|gorgeous)\s+){0,3}(?P<thing>" + _PETS + "|"
        + _THINGS + r")|(?:adopted|rescued) (?:a|an|two|three|my|our)|my (?:new |own |little |old |sweet )?(?P<pet>"
        + _PETS + r")\b|(?:" + _PETS + r") (?:named|called))\b")),
    ("plan", re.compile(
        r"(?i)\b(?:(?:i'm|i am|we're|we are)\s+(?:(?:" + _ADV + r"|so|really)\s+)*(?:going to|gonna|planning|"
        r"hoping|thinking (?:of|about)|about to|looking forward|considering|aiming|preparing|getting ready|"
        r"headed|heading|off to)|(?:i|we)\s+(?:(?:" + _ADV + r")\s+)*(?:will|won't|will not|plan|intend|want to|hope to|"
        r"would like to|wanna|aim to|am going)|(?:i|we)'ll|(?:i|we)'d (?:like|love) to|my (?:plan|goal|dream) is|"
        r"next (?:week|month|year|weekend|summer|spring|fall|autumn|winter|time)|tomorrow|this (?:weekend|coming)|"
        r"upcoming|can't wait to|(?:i'm|i am|we're|we are)\s+(?:(?:" + _ADV + r")\s+)*(?:searching|looking|saving up) for)\b")),
    ("habit", re.compile(
        r"(?i)\b(?:every (?:day|morning|night|evening|week|weekend|month|year|summer|winter|sunday|saturday)|"
        r"each (?:day|morning|week)|on weekends|(?:once|twice) a (?:day|week|month|year)|(?:\d+|two|three|four|five|"
        r"a few|several) times a (?:day|week|month|year)|(?:i|we) (?:usually|often|regularly|normally|typically) "
        r"[a-z]+|"
        # a pastime or skill told in the simple present ("I play the violin", "I speak Portuguese"): who the
        # user is, not an event; the object must follow (not "I play it by ear", "I speak to him")
        r"(?:i|we) (?:also |still |even )?(?:play|speak|practi[cs]e|collect|coach) (?!it\b|them\b|that\b|this\b|"
        r"to\b|with\b|for\b|about\b|along\b|around\b|games? with\b)(?:the |some |a little )?[a-z]{3,})\b")),
    ("event", re.compile(
        r"(?i)\b(?:(?:i|we)\s+(?:(?:" + _ADV + r")\s+)*(?!(?:loved|liked|enjoyed|hated|adored|admired|preferred|"
        r"need|feed|bleed|breed|speed|heed|proceed|succeed|exceed|seed|shed|wed|embed)\b)"
        r"(?P<past>[a-z]+ed|" + "|".join(_PAST_ONLY) + r")|"
        r"(?:i've|we've|i have|we have)\s+(?:(?:" + _ADV + r")\s+)*(?:been|had|done|made|started|finished|got|"
        r"gotten|visited|seen|tried|taken|learned|joined|begun|written|read|won|[a-z]+ed))\b")),
    ("family", re.compile(r"(?i)\b(?:my|our) (?:" + _RELATIONS + r")\b")),
    ("opinion", re.compile(
        r"(?i)\b(?:(?:i|we)\s+(?:(?:" + _ADV + r")\s+)*(?:think|believe|love|loved|like|liked|enjoy|enjoyed|prefer|"
        r"hate|hated|adore|admire|recommend|can't stand|find)|my (?:all-time )?favou?rite|(?:important|special|"
        r"meaningful|precious|dear) to (?:me|us)|means? (?:a lot|the world|so much|everything) to (?:me|us)|"
        r"(?:i'm|i am) (?:a )?(?:big |huge )?fan of|(?:i'm|i am|i was|i've always been|i've been|we're)\s+"
        r"(?:(?:" + _ADV + r"|so|very|pretty|kinda)\s+)*(?:drawn to|into|obsessed with|passionate about|interested in|"
        r"keen on|fond of|crazy about|big on|a fan of)|(?:gives?|brings?|gave|brought) (?:me|us) (?:so much |a lot of |"
        r"such )?(?:joy|happiness|peace|fulfillment|comfort|energy|hope|purpose|strength)|(?:makes?|made) (?:me|us) "
        r"(?:so |really |very |feel )*(?:happy|calm|peaceful|smile|alive|relaxed|grateful)|(?:helps?|helped) (?:me|us) "
        r"(?:to )?(?:relax|unwind|focus|cope|express|stay|de-?stress|recharge)|keeps? (?:me|us) (?:at peace|going|"
        r"sane|grounded|motivated|centered|happy)|(?:blessing|passion|lifesaver|escape|outlet) (?:for|of) (?:me|mine)|"
        r"(?:great|fun|good|nice|perfect|best) way (?:for me )?to (?:express|relax|unwind|de-?stress|recharge|reset|"
        r"chill)|(?:is|are) (?:a )?(?:big |huge )?(?:part|passion) of my)\b")),
    ("feeling", re.compile(
        r"(?i)\b(?:(?:i|we)(?:'m| am| was| were|'re| feel| felt|'ve been| have been| get| got)\s+(?:(?:so|really|"
        r"very|super|pretty|kinda|kind of|quite|a bit|a little|totally|completely|truly|incredibly|extremely|"
        r"feeling|still|just|also)\s+)*(?:excited|happy|proud|grateful|thankful|stressed|nervous|anxious|sad|"
        r"tired|exhausted|overwhelmed|swamped|scared|worried|lonely|bored|glad|thrilled|pumped|motivated|"
        r"inspired|blessed|lucky|frustrated|upset|angry|disappointed|hopeful|relieved|content|calm|relaxed|busy|"
        r"curious|confident|determined|passionate|stuck|lost|burnt out|burned out|homesick|heartbroken)|"
        r"i(?:'ve| have) been feeling)\b")),
)
# The catch-all kind needs the speaker as a subject ("I …", "we …", "My …" opening the sentence):
# "It made me feel connected", "Books guide me" say more about the book than about the user.
_EVENT_EN = dict(_KIND_EN)["event"]
# Possession said of a thing the user no longer has, or never had, or someone else's.
_NOT_OWNED = re.compile(r"(?i)\b(?:died|passed away|passed on|lost|put down|put to sleep|ran away|sold|gave away|"
                        r"rehomed|used to|wish|want|wanted|would like|hope|if|don't|do not|no longer|never|"
                        r"(?:his|her|their|your) (?:new |own |little |old )?(?:dog|cat|car|house))\b")
_STRONG = frozenset({"health", "occupation", "age", "relationship", "possession"})

# Gates: a kind's pattern runs only when the sentence has a word it needs (a set lookup on the
# sentence's tokens costs far less than scanning it with a pattern of many alternatives).
_TOKEN = re.compile(r"\w[\w'-]*")
_DIGIT = re.compile(r"\d")
_JOB_WORDS = frozenset(w for job in _JOBS.split("|") for w in job.split())
_PET_WORDS = frozenset(w for p in _words(_PETS_W) for w in p.split())
_THING_WORDS = frozenset(w for p in _words(_THINGS_W) for w in p.split())
_RELATION_WORDS = frozenset(w for p in _words(_RELATIONS_W) for w in p.split())
_FEELINGS = frozenset("excited happy proud grateful thankful stressed nervous anxious sad tired exhausted overwhelmed "
                      "swamped scared worried lonely bored glad thrilled pumped motivated inspired blessed lucky "
                      "frustrated upset angry disappointed hopeful relieved content calm relaxed busy curious confident "
                      "determined passionate stuck lost burnt burned homesick heartbroken feeling".split())


_Gate = Callable[[frozenset[str], str], bool]   # (the sentence's tokens, the sentence lower-cased) → may it be of a kind


def _has(words: str) -> _Gate:
    vocab = frozenset(words.split())
    return lambda toks, low: not vocab.isdisjoint(toks)


def _has_any(*sets: frozenset[str]) -> _Gate:
    vocab = frozenset().union(*sets)
    return lambda toks, low: not vocab.isdisjoint(toks)


_HEALTH_STEMS = ("allerg", "diagnos", "injur", "hospital", "prescri", "diabet", "pregnan", "depress", "autis",
                 "intoleran", "recover")
_HEALTH_WORDS = frozenset("disease illness sick hurt broke sprained surgery doctor medication meds asthma cancer tumor "
                          "tumour anxiety adhd migraine migraines accident blood vegetarian vegan gluten lactose chronic "
                          "insomnia covid flu fever therapy rehab concussion arthritis health".split())
_EVENT_WORDS = frozenset(_PAST_ONLY) | frozenset("been had done made got gotten seen taken begun written won read "
                                                 "i've we've".split())
_GATE_EN = {
    "health": lambda toks, low: not _HEALTH_WORDS.isdisjoint(toks) or any(st in low for st in _HEALTH_STEMS),
    "occupation": _has_any(_JOB_WORDS, frozenset(
        "work worked working shift shifts job jobs career careers boss manager coworker coworkers co-worker co-workers "
        "colleague colleagues company clients client students patients office startup workplace employer internship "
        "classes degree major thesis dissertation promotion teach study studied founded studying majoring freshman "
        "sophomore junior senior promoted hired fired laid quit store shop business restaurant bakery firm practice "
        "clinic salon brand channel podcast blog studio boutique cafe agency customers".split())),
    "age": lambda toks, low: _DIGIT.search(low) is not None,
    "relationship": _has_any(_RELATION_WORDS, frozenset(
        "married engaged divorced separated single dating together widow widower parent".split())),
    "possession": _has_any(_PET_WORDS, _THING_WORDS, frozenset({"adopted", "rescued"})),
    "plan": _has("going gonna planning hoping thinking about looking considering aiming preparing getting headed "
                 "heading off will won't plan intend want hope would wanna aim i'll we'll i'd we'd next tomorrow weekend "
                 "coming upcoming goal dream searching looking saving can't"),
    "habit": _has("every each weekends once twice times usually often regularly normally typically play speak "
                  "practice practise collect coach"),
    "event": lambda toks, low: not _EVENT_WORDS.isdisjoint(toks) or any(t.endswith("ed") for t in toks),
    "family": _has_any(_RELATION_WORDS),
    "opinion": _has("think believe love loved like liked enjoy enjoyed prefer hate hated adore admire recommend can't "
                    "find favorite favourite important special meaningful precious dear means mean fan part passion drawn into "
                    "obsessed passionate interested keen fond crazy big gives give brings bring gave brought makes make "
                    "made helps help helped keeps keep blessing lifesaver escape outlet way"),
    "feeling": _has_any(_FEELINGS),
}
_FP_WORDS = frozenset("i i'm i've i'll i'd me my mine myself we we're we've we'll we'd us our ours ourselves".split())
_SUBJECT_WORDS = frozenset("i i'm i've i'll i'd we we're we've we'll we'd".split())
_POSSESSIVE_WORDS = frozenset("my our mine ours".split())
_WE_GENERIC = re.compile(r"(?i)(?:^|[,;-]\s*|\b(?:and|but|together|if)\s+)we\s+(?:all\s+|both\s+|really\s+|"
                         r"definitely\s+)?(?:can|could|should|must|might|need to|have to|gotta)\b|\bif we\b")
_YOU_WORDS = frozenset("you your you're you've you'll yours yourself ya".split())
_FILLER_ANY_GATE = frozenset("thank thanks talk catch see care good nice glad happy proud sorry means mean keep got through "
                             "do make what never won't check since".split())
# Content words a sentence needs, by kind: a bare "I loved it!" or "I'm so excited!" says too little.
_MIN_WORDS = {"event": 2, "plan": 2, "habit": 2, "opinion": 2, "feeling": 3, "family": 3, "statement": 4}


def _third_person_verb(word: str) -> str:
    lw = word.lower()
    irregular = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "haven't": "hasn't", "were": "was",
                 "go": "goes", "dont": "doesn't", "ain't": "isn't", "'m": "is"}
    if lw in irregular:
        return irregular[lw]
    if lw.endswith("ly") and lw not in ("fly", "apply", "rely", "reply", "supply", "multiply", "ally", "bully"):
        return word           # an adverb the pattern did not skip ("I really, really love…")
    if (lw in _IRREGULAR_PAST or (lw.endswith("ed") and lw not in _PRESENT_ED)
            or (lw.endswith("ing") and lw not in _ING_VERBS) or lw.endswith("n't")
            or not lw.isalpha()
            or lw in {"was", "can", "could", "will", "would", "should", "might", "must", "may", "had", "did",
                      "cannot", "used", "gotta", "got", "too", "myself", "and", "or", "who", "that", "as", "a", "the",
                      "an", "to", "in", "on", "at", "for", "with", "of", "if", "when", "because", "since", "but"}):
        return word
    if lw.endswith(("s", "sh", "ch", "x", "z", "o")):
        return word + "es"
    if lw.endswith("y") and len(lw) > 1 and lw[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


_PRONOUN = re.compile(r"(?<![\w'-])(?:(?P<icontr>[Ii]'(?:m|ve|ll|d))|(?P<iam>[Ii] am)|(?P<i>[Ii])|(?P<wecontr>[Ww]e'(?:re|ve|ll|d))"
                      r"|(?P<other>[Mm]e|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Uu]s|[Oo]ur|[Oo]urs|[Oo]urselves))(?![\w-])")
_VERB_AFTER = re.compile(r"((?:\s+(?:" + _ADV + r"))*)\s+([A-Za-z']+)")
_COORD = re.compile(r"(?:,\s*|\s)(?:and|but|so|then|or)\s+$")
_COMPOUND = re.compile(r"(?:\b(?:my|our|his|her|their|the)\s+[\w-]+|\b[A-Z][a-z]+)\s+and\s+$")  # "Anthony and I"
_THEY = re.compile(r"(?i)\b(?:they|them|their|theirs|they're|they've|they'll|themselves)\b")
_LATER = {"me": "them", "my": "their", "mine": "theirs", "myself": "themselves", "our": "their", "ours": "theirs",
          "ourselves": "themselves", "us": "them"}
_HAD_NEXT = frozenset("been had never already just gone done seen forgotten known got gotten".split())
_OTHERS = {"me": "User", "my": "User's", "mine": "User's", "myself": "themselves", "we": "User and others",
           "us": "User and others", "our": "User's", "ours": "User's", "ourselves": "themselves"}


def third_person_en(text: str) -> str:
    """First person → "User": I → User (with the verb agreeing: "I work" → "User works"), I'm → User
    is, I've → User has, my → User's, me → User, we → User and others. "I" after "and" in a clause
    that already has the user as subject is dropped: "I'm a nurse and I work…" → "… and works…"."""
    out: list[str] = []
    pos = 0
    seen_i = False     # "I" was the subject already: "… and I work" drops the second subject
    named = False      # "User" is written once; later my/me/myself become their/them/themselves…
    ambiguous = _THEY.search(text) is not None   # …unless "they" already means someone else there
    for m in _PRONOUN.finditer(text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        pos = m.end()
        g = m.lastgroup
        tok = m.group(0)
        if g in ("icontr", "iam"):
            suffix = tok[-2:].lower() if g == "icontr" else "am"
            nxt = _VERB_AFTER.match(text, pos)
            word = {"'m": "is", "am": "is", "ve": "has", "ll": "will"}.get(suffix.lstrip("'"))
            if suffix == "'d":
                word = "had" if nxt and (nxt.group(2).lower() in _HAD_NEXT) else "would"
            elif suffix == "'m":
                word = "is"
            drop = seen_i and _COORD.search(text, max(0, m.start() - 8), m.start()) is not None
            # (ignore: word is None only for 'm and 'd, both set just above)
            out.append(word if drop else "User " + word)  # type: ignore[arg-type, operator]
            seen_i = named = True
        elif g == "i":
            # "my family and I went" is a compound subject (plural verb, nothing dropped); "I'm a
            # nurse and I work" repeats the subject of a coordinated clause (dropped)
            plural = _COMPOUND.search(text, max(0, m.start() - 40), m.start()) is not None
            drop = not plural and seen_i and _COORD.search(text, max(0, m.start() - 8), m.start()) is not None
            nxt = _VERB_AFTER.match(text, pos)
            if nxt and nxt.group(2).lower() in _OTHERS:
                nxt = None            # "I myself built it": the pronoun is rewritten on its own
            if nxt and not plural:
                out.append(("" if drop else "User") + nxt.group(1) + " " + _third_person_verb(nxt.group(2)))
                if drop:
                    out[-1] = out[-1].lstrip()
                pos = nxt.end()
            else:
                out.append("" if drop else "User")
            seen_i = named = True
        elif g == "wecontr":
            out.append("User and others " + {"re": "are", "ve": "have", "ll": "will", "d": "would"}[tok[3:].lower()])
            named = True
        else:
            low = tok.lower()
            out.append(_LATER[low] if named and not ambiguous and low in _LATER else _OTHERS[low])
            named = True
    out.append(text[pos:])
    s = "".join(out)
    # "I want 'em to feel at home": spoken "them", written out so a reader (and reply_context's
    # pointing-back check) sees the pronoun
    s = _EM.sub("them", s)
    return re.sub(r"  +", " ", s)


_EM = re.compile(r"(?<![\w'’])['’]em\b")


_CAPWORDS = re.compile(r"[A-Z](?<![\w'’][A-Z])[\w'’-]*(?:\s+(?:of\s+|the\s+|de\s+|von\s+)?[A-Z][\w'’-]*)*")
_QUOTED = re.compile(r"[\"“]([^\"”\n]{2,60})[\"”]")
_NOT_ENTITY = frozenset(
    "i i'm i've i'll i'd user user's the a an my our we it it's this that these those there here he she they "
    "his her their you your yes yeah yep no oh wow hey hi hello thanks thank so and but also just last next "
    "this today yesterday tomorrow monday tuesday wednesday thursday friday saturday sunday what when where why "
    "how who if as at in on for to of with from by after before since then well ok okay sure great awesome "
    "cool nice lol haha btw anyway anyways plus right true gonna let let's my me mine us one two some any all "
    "every each both most many much more such very really can could would should will did do does had have has "
    "is was are were be been being not never always sometimes maybe guess totally definitely absolutely "
    "actually honestly finally recently lately sorry please congrats congratulations aww dude man omg gosh best almost "
    "especially since because although though once maybe perhaps luckily hopefully sadly anyways life gotta".split())
_TAG_VOCAB = frozenset(_words(_PETS_W) + _words(_RELATIONS_W) + _JOBS.split("|") + [
    t for t in _words(_THINGS_W) if t != "home"] + _words(
    "allergy surgery hospital diabetes asthma cancer pregnancy vegetarian vegan wedding birthday conference concert "
    "marathon trip vacation camping hiking painting pottery yoga basketball soccer football tennis guitar piano violin "
    "book novel movie film game race competition tournament interview exam graduation promotion night_shift "
    "night_shifts"))


def _vocab_tags(low: str) -> list[str]:
    toks = _TOKEN.findall(low)
    out = [t for t in toks if t in _TAG_VOCAB]
    out.extend(b for b in map(" ".join, zip(toks, toks[1:])) if b in _TAG_VOCAB)
    return out


def _tags_en(body: str, extra: list[str]) -> tuple[str, ...]:
    tags: list[str] = []
    for m in _CAPWORDS.finditer(body):
        words = m.group(0).replace("’", "'").split()
        if m.start() == 0:
            # capitalised by position, not as a name: "Seeing…", "Books…", "Especially…", "They're…"
            first = words[0].lower()
            if first.endswith(("ing", "ly", "'re", "'ve", "'ll", "'d", "'m")) or (first.endswith("s") and not
                                                                                first.endswith(("ss", "'s"))):
                words.pop(0)
        while words and words[0].lower().removesuffix("'s") in _NOT_ENTITY:
            words.pop(0)
        while words and words[-1].lower() in _NOT_ENTITY:
            words.pop()
        if not words:
            continue
        tag = " ".join(words)
        tag = tag[:-2] if tag.endswith("'s") else tag
        if len(tag) > 1:
            tags.append(tag.lower())
    tags.extend(m.group(1).strip().lower() for m in _QUOTED.finditer(body))
    low = body.lower()
    tags.extend(_vocab_tags(low))
    tags.extend(extra)
    tags.extend(_noun_phrases(low))
    return _dedup(tags)


_PHRASE_TOKEN = re.compile(r"[a-z][a-z'-]*|[^\sa-z]")
_DETERMINERS = frozenset("a an the my our some these his her their two three four five several another".split())
_ADJECTIVES = frozenset(
    "great awesome amazing new big little small huge old young first second third last next real whole few same other "
    "good bad nice cool beautiful lovely cute best favorite favourite fun special different own local short long "
    "tough hard easy quick whole entire huge tiny super incredible wonderful fantastic perfect gorgeous fresh "
    "recent latest couple bit lot lots ton tons kind sort type part interesting strong stronger carefree happy sad "
    "hard-working positive negative important huge massive main major minor full empty quiet loud busy free".split())
_NOT_TOPIC = frozenset("time times day days week weeks month months year years weekend weekends while minute minutes "
                       "hour hours moment moments named called way ways towards toward into onto through across "
                       "around over under between among without within during behind near like than via per upon "
                       "along beyond against toward despite except".split())


def _noun_phrases(low: str) -> list[str]:
    """Topic words without a tagger: the words after a determiner up to a function word or a
    punctuation mark, adjectives dropped, the last two kept ("a LGBTQ support group" → "support
    group", "my new dance studio" → "dance studio", "some wholesalers" → "wholesalers")."""
    toks = _PHRASE_TOKEN.findall(low)
    out: list[str] = []
    i = 0
    while i < len(toks):
        if toks[i] in _DETERMINERS:
            words: list[str]
            j, words = i + 1, []
            while j < len(toks) and len(words) < 4 and toks[j][0].isalpha() and toks[j] not in STOP \
                    and toks[j] not in _NOT_ENTITY and toks[j] not in _EMPTY_WORDS and toks[j] not in _DETERMINERS \
                    and "'" not in toks[j] and toks[j] not in _NOT_TOPIC \
                    and not (len(toks[j]) > 5 and toks[j].endswith("ed")):
                words.append(toks[j])
                j += 1
            while words and words[0] in _ADJECTIVES:
                words.pop(0)
            if len(words) > 1 and words[-1].endswith("ing"):
                words.pop()             # "people serving …": the verb of a reduced clause
            if words and len(words) <= 3 and not words[-1].endswith("ly"):
                out.append(" ".join(words[-2:]))
            i = j
        else:
            i += 1
    return out


def _dedup(tags: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for t in tags:
        t = re.sub(r"\s+", " ", t).strip(" ,.'\"")
        if t and t not in out:
            out.append(t)
    return tuple(out[:MAX_TAGS])


def _content_words_en(low: str) -> int:
    return sum(1 for w in _TOKEN.findall(low) if w not in STOP and w not in _NOT_ENTITY and w not in _EMPTY_WORDS)


# Words that carry no fact: intensifiers, evaluations, fillers ("That's really cool, I like it").
_EMPTY_WORDS = frozenset("i'm i've i'll i'd it's that's there's here's so too really cool great awesome amazing nice good "
                         "super pretty lot lots much thing things stuff way gonna wanna kinda can't don't won't didn't "
                         "isn't wasn't yeah oh well sure like love loved liked fun wow bad".split())


_DATE_EN = {"day": "on {}", "week": "week of {}", "weekend": "weekend of {}", "month": "in {}", "year": "in {}",
            "season": "in {}"}
_DATE_ZH = {"day": "{}", "week": "{} 那一周", "weekend": "{} 那个周末", "month": "{}", "year": "{}年", "season": "{}"}
_MONTHS_EN = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
              "November", "December")


def _month_en(rel: RelativeDate) -> str:
    """Days and weeks as ISO dates ("2026-11-23"); a month by its name ("August 2023"), as people
    ask about it."""
    return f"{_MONTHS_EN[rel.day.month - 1]} {rel.day.year}" if rel.unit == "month" else rel.label


_SEASON_ZH = {"spring": "春天", "summer": "夏天", "fall": "秋天", "autumn": "秋天", "winter": "冬天"}


_DANGLING = re.compile(r"(?i)(?:^|\s)(?:just|only|since|until|by|on|in|during|from|as of)$")


def _remove_span(text: str, start: int, end: int) -> str:
    if text.startswith("'s ", end) and _IS_NEXT.match(text, end + 3):
        # "Tomorrow's gonna be a great night", "Today's my birthday": "'s" is "is", the day its
        # subject → "It's gonna be …", "It's User's birthday" (the date is written after)
        return text[:start] + ("It" if not text[:start].strip() else "it") + text[end:]
    if text.startswith(("'s ", "'s,"), end):           # "during last week's game" → "during the game"
        return text[:start] + "the" + text[end + 2:]
    left, right = text[:start].rstrip(" ,，"), text[end:].lstrip(" ,，")
    left = _DANGLING.sub("", left)                       # "Just last week I…" → "I…"
    space = (" " if left and right and not _CJK.match(left[-1]) and not _CJK.match(right[0]) and right[0] not in ",.!?;:"
             else "")
    if left and right and _CJK.match(right[0]) and text[:start].rstrip().endswith(("，", ",")):
        space = "，"     # "我是护士，上个月去了东京" → "我是护士，去了东京": the clauses stay apart
    return (left + space + right).strip(" ,-，")


_IS_NEXT = re.compile(r"(?:gonna|going|been|my|our|a|an|the|so|such|really|very|just|also|finally|not|"
                      r"gotta|definitely|too|all|one|User's|their)\b")


def _cap(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,;:-") + "…"


def _kind(patterns: Iterable[tuple[str, re.Pattern[str]]], body: str) -> tuple[str, re.Match[str] | None]:
    for kind, pat in patterns:
        m = pat.search(body)
        if m:
            return kind, m
    return "statement", None


_CONDITION = re.compile(r"(?i)\b(?:allergic|allergy|allergies|diabet\w*|asthma\w*|vegetarian|vegan|gluten|celiac|coeliac|"
                        r"lactose|intoleran\w*|epilep\w*|adhd|autis\w*|arthritis|high blood pressure|hypertension|"
                        r"pregnant|chronic|kosher|halal)\b|过敏|糖尿病|高血压|哮喘|素食|吃素|乳糖不耐|癫痫|怀孕|不耐受")


def _back_a_week(rel: RelativeDate) -> RelativeDate:
    day = rel.day - timedelta(days=7)
    return dataclasses.replace(rel, day=day, label=day.isoformat())


def _draft(kind: str, content: str, tags: tuple[str, ...], rel: RelativeDate | None, lang: str,
           key: str | None = None, value: str | None = None) -> FactDraft:
    category, importance = STATEMENT_KINDS[kind]
    if rel is not None:
        importance += 0.05   # a dated happening is easier to place and to ask about
    if kind == "health" and _CONDITION.search(content):
        # a standing condition or diet ("User is vegetarian", "用户有高血压") is a constraint on what
        # an agent suggests, like an allergy: category policy, tagged so forgetting keeps it
        category, importance, tags = "policy", max(importance, 0.85), _dedup(["constraint", *tags])
    return FactDraft(rule=f"statement.{lang}.{kind}", key=key, value=value, content=content, category=category,
                     importance=round(min(importance, 0.95), 2), slot_hint=kind, tags=tags,
                     event_date=rel.day.isoformat() if rel else None)


_APPOSITIVE_LEAD = re.compile(r"^(?P<name>[A-Z][a-z]+(?: [A-Z][a-z]+)?),\s+(?P<app>(?:[Mm]y|[Oo]ur)\s+[a-z][\w'-]*"
                              r"(?:\s+[a-z][\w'-]*){0,3}),\s+(?=[a-z])")
_APPOSITIVE_MID = re.compile(r"(?P<app>\b(?:[Mm]y|[Oo]ur)\s+[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,2}),\s+"
                             r"(?P<name>[A-Z][a-z]+(?: [A-Z][a-z]+)?),\s+(?=[a-z])")


def _statement_en(sentence: str, at: datetime | None, relaxed: bool = False) -> FactDraft | None:
    """One English sentence as a statement, or None. `relaxed`: a follow-up sentence will carry the
    detail, so a sentence too short alone ("I love this series") is enough."""
    s = sentence.strip().replace("’", "'").replace("‘", "'")
    if len(s) > 8 and s.isupper():
        s = s.lower()                      # "MY DOG DIED LAST WEEK"
    if s.endswith("?"):
        # "I finished another pottery project - want to see a pic?": the statement before the dash stays
        cut = max(s.rfind(" - "), s.rfind(" – "), s.rfind(" — "))
        if cut <= 0:
            return None
        s = s[:cut]
    toks0 = frozenset(_TOKEN.findall(s.lower()))
    if _FP_WORDS.isdisjoint(toks0) and _ELIDED_WORDS.isdisjoint(toks0) and _CHAT_FP.isdisjoint(toks0):
        return None     # nothing about the speaker (most sentences of a chat leave here)
    if not _CHAT_WORDS.isdisjoint(toks0):
        s = _NO_APOSTROPHE.sub(lambda m: _CONTRACTIONS[m.group(0).lower()], s)
    # an appositive keeps the name: "Tom, my best friend, moved…" → "my best friend Tom moved…"
    s = _APPOSITIVE_LEAD.sub(r"\g<app> \g<name> ", s)
    s = _APPOSITIVE_MID.sub(r"\g<app> \g<name> ", s)
    body = _TRAILING_FILLER.sub("", s.rstrip(".!…~ ")).strip()
    body = _strip_lead(body)
    tv = _TRAILING_VOCATIVE.search(body)
    if tv and tv.group(1).lower() not in _NOT_ENTITY:
        body = body[:tv.start()]
    voc = _VOCATIVE.match(body)
    if voc and voc.group(1).lower() not in _NOT_ENTITY and not voc.group(1).lower().endswith("ly"):
        body = _strip_lead(body[voc.end():])
    if "?" in body or len(body) < 4:
        return None
    if _IMPERATIVE.match(body):
        return None           # "Write me a poem about my cat": a request for the task at hand
    e = _ELIDED.match(body)
    if e:
        verb = e.group(2).lower()
        subject = ("I'm " if verb in {"gonna", "planning to", "planning on", "planning a", "off to"}
                   else "I've " if verb == "been" else "I ")
        body = subject + body[0].lower() + body[1:]
    low = body.lower()
    toks = frozenset(_TOKEN.findall(low))
    if _FP_WORDS.isdisjoint(toks) or _FILLER_START_EN.match(body):
        return None
    kind, km = "statement", None
    for k, pat in _KIND_EN:
        if _GATE_EN[k](toks, low):
            km = pat.search(body)
            if km:
                kind = k
                break
    words = _content_words_en(low)
    ruled = None
    if kind not in _STRONG:
        if ((not _FILLER_ANY_GATE.isdisjoint(toks) and _FILLER_ANY_EN.search(body))
                or (not _YOU_WORDS.isdisjoint(toks) and kind in {"opinion", "feeling", "statement", "family", "plan"})):
            return None
        ruled = classify_rules(body) if kind == "statement" else None
        if ruled is not None and (ruled[0] not in ("tool_failure", "identity", "policy")
                                  or (ruled[0] == "tool_failure" and _TECH_WORDS.isdisjoint(toks))
                                  or (ruled[0] == "identity" and ruled[2] not in ("location", "age"))):
            ruled = None      # "my business is failing" is no tool failure, "a constant reminder" no job
        if words < (1 if relaxed else 2 if ruled else _MIN_WORDS[kind]):
            return None
        if kind == "statement" and _SUBJECT_WORDS.isdisjoint(toks) and _POSSESSIVE_WORDS.isdisjoint(toks):
            return None
        if kind in ("statement", "plan", "opinion") and _WE_GENERIC.search(body):
            return None       # "We can make a difference together": a motto, not a fact about anyone
    elif words < 1:
        return None
    rels = relative_dates(body, at) if at is not None else []
    rel = rels[0] if rels else None
    # (the ignores below: a date is found only when `at` is given, so rel is not None means at is not None)
    if (rel is not None and rel.unit in ("weekend", "week") and rel.day > at.date()  # type: ignore[union-attr]
            and kind in ("event", "plan") and _EVENT_EN.search(body)):
        rel, kind = _back_a_week(rel), "event"   # "this weekend we went to…": told in the past, the one just gone
    if kind in {"event", "feeling", "opinion", "statement", "family"} and rel is not None and rel.day > at.date():  # type: ignore[union-attr]
        kind = "plan"
    tag_extra: list[str] = []
    key = value = None
    if kind == "occupation":
        o = _OCC_KEY.search(body)
        if o:
            key, value = "occupation", o.group("job").lower()
    if km is not None and kind == "possession":
        thing = km.groupdict().get("thing") or km.groupdict().get("pet")
        if thing:
            tag_extra.append(thing.lower())
            if not _NOT_OWNED.search(body):
                # the polarity slot of the ontology: "I adopted a dog" supersedes "I don't have a dog"
                from domain.slots import canon_thing
                key, value = f"has:{canon_thing(thing)}", "true"
    text = body
    inline = False
    if rel is not None:
        if _PREP_BEFORE.search(body, max(0, rel.start - 8), rel.start):
            # "by tomorrow" → "by 2026-12-01": a deadline or a start reads right only in place
            text = body[:rel.start] + _month_en(rel) + body[rel.end:]
            inline = True
        else:
            for r in reversed(rels):       # every phrase naming that date: "Yesterday was… on screen yesterday"
                if r.label == rel.label or r.start == rel.start:
                    text = _remove_span(text, r.start, r.end)
            text = _DATE_AS_SUBJECT.sub("", text)   # "Last week was wild, I got noticed…" → "I got noticed…"
    content = third_person_en(text).strip(" ,-")
    if not content:
        return None
    content = content[0].upper() + content[1:]
    content = _cap(content)
    if rel is not None and not inline:
        content += " (" + _DATE_EN[rel.unit].format(_month_en(rel)) + ")"
    if kind == "statement" and ruled is not None:
        # the catch-all takes the classification rules' word when they have one ("… fails with a
        # timeout error" is a tool failure, "User is from Ohio" an identity, "I dont eat meat" a policy)
        return FactDraft(rule="statement.en.statement", key=None, value=None, content=content, category=ruled[0],
                         importance=0.6 if ruled[0] == "tool_failure" else 0.7, slot_hint=ruled[2],
                         tags=_tags_en(body, tag_extra), event_date=rel.day.isoformat() if rel else None)
    return _draft(kind, content, _tags_en(body, tag_extra), rel, "en", key, value)


# -- Chinese ----------------------------------------------------------------------------------
_LEAD_ZH = re.compile(r"^(?:(?:你好|您好|嗨|哈喽|哈啰|hello|hi|hey|嗯+|哦+|噢|喔|啊|哈+|呵+|好的|好吧|对|是的|没错|"
                      r"谢谢(?:你|您)?|多谢|感谢|对了|另外|还有|其实|然后|所以|不过|但是|而且|话说|说起来)[，,！!。~～、\s]*)+",
                      re.I)
_QUESTION_ZH = re.compile(r"(?:吗|么|呢|吧|不)[。！!~～\s]*$")
_FILLER_ZH = re.compile(r"^(?:我(?:也|都|就)?(?:知道|明白|懂|同意|理解|收到|记住|记得|觉得也是|也是|也这么觉得|没事|很好|还好|"
                        r"挺好|好多了|马上|这就)(?:了|啦|的)?|我(?:会|也会)(?:的|努力的|加油的)?|我也一样|我也是)$")
# About the conversation itself ("这个问题我还是不太懂", "我刚才说错了"), not about the user's world.
_CONVO_ZH = re.compile(r"不太懂|不明白|没看懂|没听懂|看不懂|听不懂|说错了|打错了|写错了|搞错了|我的意思是|明白你的意思|"
                       r"懂你的意思|你说得对|你说的对")
# A question without its question mark ("我想学做菜，有什么建议").
_ASKS_ZH = re.compile(r"什么|怎么|如何|哪里|哪儿|哪个|哪些|为什么|为啥|有没有|是不是|能不能|可不可以|多少")
_THANKS_ZH = re.compile(r"谢谢|感谢|多谢|辛苦了|加油|再见|拜拜|晚安")
_JOBS_ZH = (r"护士|医生|大夫|老师|教师|教授|工程师|程序员|设计师|律师|会计|厨师|司机|警察|记者|作家|画家|销售|经理|"
            r"产品经理|学生|研究生|博士生|大学生|高中生|公务员|护工|保姆|快递员|外卖员|店长|老板|创业者|自由职业者|"
            r"摄影师|演员|歌手|运动员|教练|翻译|编辑|主播|研究员|科学家|药剂师|牙医|兽医|飞行员|空姐|军人|农民|工人")
_PETS_ZH = r"猫咪|小猫|猫|小狗|狗狗|狗|鹦鹉|兔子|仓鼠|金鱼|乌龟|宠物"
_RELATIONS_ZH = (r"老公|老婆|丈夫|妻子|爱人|儿子|女儿|孩子|宝宝|妈妈|爸爸|母亲|父亲|父母|哥哥|姐姐|弟弟|妹妹|男朋友|"
                 r"女朋友|对象|爷爷|奶奶|外公|外婆|姥姥|姥爷|朋友|闺蜜|室友|同学|家人")
_KIND_ZH: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("health", re.compile(r"过敏|生病|病了|住院|医院|手术|吃药|药物|发烧|感冒|糖尿病|高血压|哮喘|抑郁|焦虑症|失眠|怀孕|"
                          r"受伤|骨折|体检|素食|吃素|头疼|头痛|胃疼|腰疼|康复|减肥|节食|戒烟|戒酒|血压|血糖")),
    ("occupation", re.compile(r"工作|上班|职业|夜班|白班|加班|公司|辞职|跳槽|升职|实习|读书|上学|读大学|读研|考研|"
                              r"是一名|是一个(?:" + _JOBS_ZH + r")|当(?:" + _JOBS_ZH + r")|我是(?:" + _JOBS_ZH + r")")),
    ("age", re.compile(r"我(?:今年)?(?:\d{1,3}|[一二三四五六七八九十]{1,3})岁")),
    ("relationship", re.compile(r"结婚|订婚|离婚|单身|谈恋爱|在一起|分手")),
    ("possession", re.compile(r"养了|领养|收养|买了|有一(?:只|条|辆|套|台|个)(?:" + _PETS_ZH + r")?|我(?:家|的)(?:"
                              + _PETS_ZH + r"|车|房子|电脑|笔记本)")),
    ("plan", re.compile(r"打算|计划|准备|想要|想去|要去|将要|明天|后天|下周|下个?月|明年|下星期|下礼拜|下个星期|下周末|"
                        r"周末要|会去")),
    ("habit", re.compile(r"每天|每周|每个周末|每晚|每早|经常|一般都|通常|平时|总是|常常|天天")),
    ("opinion", re.compile(r"觉得|认为|喜欢|爱|讨厌|最爱|推荐|支持|反对")),
    ("event", re.compile(r"了|过")),
    ("family", re.compile(r"我(?:的|们家)?(?:" + _RELATIONS_ZH + r")")),
    ("feeling", re.compile(r"开心|高兴|难过|伤心|累|紧张|压力|兴奋|担心|无聊|郁闷|烦|激动|失落|孤独|心情")),
)
_OWN_ZH = re.compile(r"我(?:们|家|们家)?(?:刚|刚刚|最近|上周|上个月|去年)?(?:养了|领养了?|收养了?|买了|有)(?:一|两|几)?[只条辆套台个]?"
                     r"(小狗|狗狗|狗|猫咪|小猫|猫|兔子|鹦鹉|仓鼠|金鱼|乌龟|车|房子|电脑)")
_ZH_THING = {"小狗": "狗", "狗狗": "狗", "小猫": "猫", "猫咪": "猫"}
_TAG_ZH = re.compile(r"(" + _JOBS_ZH + "|" + _PETS_ZH + "|" + _RELATIONS_ZH + r"|夜班|过敏|花生|手术|医院|婚礼|生日|"
                     r"旅行|出差|会议|考试|面试|演唱会|马拉松)")
_NAME_ZH = re.compile(r"(?:叫|名叫|叫做)\s*([A-Za-z][A-Za-z'-]*|[\u4e00-\u9fff]{2,3}?)(?=\s*的|[，,。.!！\s]|$)")
_PLACE_ZH = re.compile(r"(?:住在|搬到了|搬到|老家在|老家是|去了|去|到了|到|回到|回|来自|飞往)(?![了一二三四五六七八九十几两这那])"
                       r"([\u4e00-\u9fff]{2,3}?)(?=玩|旅游|旅行|出差|工作|上班|读书|上学|留学|开会|看|见|[，,。.!！\s]|$)"
                       r"|在(?!在)([\u4e00-\u9fff]{2,3}?)(?=做|工作|上班|读书|上学|生活|住|长大)")
# "上周我领养了…" → "我上周领养了…": the subject first, as a memory sentence reads ("用户上周…").
_ZH_TIME_FIRST = re.compile(r"^((?:上|下|这|本)个?(?:周末|周|星期|礼拜|月)|大前天|前天|昨天|昨晚|今天|今晚|明天|后天|前年|去年|"
                            r"今年|明年|最近|刚才|现在|\d{1,2}天前)[，,\s]*(我们|我)")
# Requests to the assistant ("帮我查一下…", "请给我…", "你能…") are the task at hand, not facts.
_REQUEST_ZH = re.compile(r"(?:帮我|帮忙|请|麻烦|给我|能不能|能否|可不可以|可以帮|你|您|告诉我|让我看看|我(?:想)?要(?:一|个|点))")
_ASCII_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")


def _statement_zh(sentence: str, at: datetime | None) -> FactDraft | None:
    s = sentence.strip()
    if not s or s[-1] in "?？" or _QUESTION_ZH.search(s):
        return None
    body = _LEAD_ZH.sub("", s).strip("，,。.！!~～ ")
    if _FILLER_ZH.match(body) or _REQUEST_ZH.match(body) or _CONVO_ZH.search(body):
        return None
    kind, _ = _kind(_KIND_ZH, body)
    if kind not in _STRONG and _ASKS_ZH.search(body):
        return None
    if "我" not in body:
        # Chinese leaves the subject out ("最近工作压力好大，天天加班"): kept only when what it says is
        # about a person's job, health, family or belongings; "今天天气不错" is not.
        if kind not in _STRONG:
            return None
        body = "我" + body
    chars = len(_CJK.findall(body.replace("我", "")))
    if kind not in _STRONG:
        if _THANKS_ZH.search(body) or chars < 4:
            return None
        if ("你" in body or "您" in body) and kind in ("opinion", "feeling", "statement", "family", "plan"):
            return None       # "我很喜欢你的回答": about the other side of the conversation
    rels = relative_dates(body, at) if at is not None else []
    rel = rels[0] if rels else None
    # (the ignores below: a date is found only when `at` is given, so rel is not None means at is not None)
    if kind == "event" and rel is not None and rel.unit in ("weekend", "week") and rel.day > at.date():  # type: ignore[union-attr]
        rel = _back_a_week(rel)        # "this weekend we went to…": told in the past, the weekend just gone
    if kind in {"event", "feeling", "opinion", "statement", "family"} and rel is not None and rel.day > at.date():  # type: ignore[union-attr]
        kind = "plan"
    key = value = None
    if kind == "occupation":
        o = re.search(r"我是(?:一名|一个|个)?(" + _JOBS_ZH + r")", body)
        if o:
            key, value = "occupation", o.group(1)
    elif kind == "possession":
        o = _OWN_ZH.search(body)
        if o and not re.search(r"死了|去世|丢了|走丢|卖了|送人|送走", body):
            key, value = f"has:{_ZH_THING.get(o.group(1), o.group(1))}", "true"
    label = ""
    if rel is not None:
        label = rel.label
        if rel.unit == "season":
            name, year = label.split()
            label = f"{year}年{_SEASON_ZH[name]}"
        elif rel.unit == "month":
            label = f"{rel.day.year}年{rel.day.month}月"
        label = _DATE_ZH[rel.unit].format(label)
    inline = rel is not None and rel.start > 0 and body[rel.start - 1] in "从自到于截"
    if inline:      # "我从去年开始学吉他" → "用户从2025年开始学吉他": a start or an end reads right only in place
        text = body[:rel.start] + label + body[rel.end:]  # type: ignore[union-attr]  # inline implies rel is not None
    elif rel is not None:
        text = _remove_span(body, rel.start, rel.end)
    else:
        text = _ZH_TIME_FIRST.sub(r"\2\1", body)
    content = _cap(text.replace("我们全家", "用户全家").replace("我们家", "用户家").replace("我们", "用户等人")
                   .replace("我", "用户"), 200)
    if rel is not None and not inline:
        content += "（" + label + "）"
    tags = ([m.group(1) for m in _NAME_ZH.finditer(body)] + [m.group(1) or m.group(2) for m in _PLACE_ZH.finditer(body)]
            + [m.group(0) for m in _TAG_ZH.finditer(body)] + [w for w in _ASCII_WORD.findall(body)])
    return _draft(kind, content, _dedup([t.lower() for t in tags]), rel, "zh", key, value)


# -- the channel ------------------------------------------------------------------------------

def statement_spans(text: str, at: datetime | None = None,
                    reply_to: str | None = None) -> list[tuple[int, int, FactDraft]]:
    """(start, end, draft) for each sentence worth keeping, in order; spans are in `text`.
    `reply_to`: what this turn replies to (reply_context.reply_pointer of the other speaker's
    previous turn: its question, else its remark), kept with a statement near the turn's start
    that leans on it and that nothing in the turn names."""
    text = bounded(text)
    out: list[tuple[int, int, FactDraft]] = []
    follows = False           # the previous sentence became the last statement (and took no follow-up yet)
    followed = False          # the previous sentence was a follow-up that joined the last statement
    short: tuple[int, str] | None = None   # the previous sentence, first-person but too short alone
    replying: list[int] = []  # statements (indexes in out) that lean on the question they answer
    named: tuple[int, str] | None = None   # the previous sentence, kept nothing, may name an antecedent
    unkept: list[tuple[int, str]] = []     # every sentence that kept nothing, for a statement still unresolved (5.)
    fences = [f.span() for f in _FENCE.finditer(text)] if "```" in text else []
    for i, (m, cjk) in enumerate(_segments(text)):
        if i >= MAX_SENTENCES:
            break
        sentence = m.group(0)[:MAX_SENTENCE_CHARS]
        before, named = named, None      # set again at the end, only for a sentence that kept nothing
        touching, followed = follows or followed, False   # the last statement ends at the sentence before
        if not sentence.strip() or _looks_like_code(sentence) or any(a <= m.start() < b for a, b in fences):
            follows, short = False, None
            continue
        draft = _guarded(_statement_zh if cjk else _statement_en, sentence, at)
        if draft is not None and not cjk and _leans_on_context(draft.content):
            # "I use a whiteboard to stay on track. It keeps me motivated.": the second statement's
            # subject is the first's object, so alone it is a fragment; so is one whose object is
            # ("… a book I really enjoy. I highly recommend it.": reply_context.points_back). 1. It joins the statement
            # before it (the sentence that names what "it" is). 2. The sentence before said nothing
            # alone but names it: both, as one fact. 4. (below) The sentence before kept nothing but
            # names it: it goes first. 3. Nothing in this turn names it (it points into the other
            # speaker's turn): kept with what it replies to, an aside before a statement of its own cut off;
            # 5. and 6. (_with_context, at the end) for one that still names nothing.
            if touching:
                # (also after a follow-up: "My old area was hit by a flood. The infrastructure wasn't
                # great so homes were ruined. It's reminding me we need to fix things up.")
                start, _, prev = out[-1]
                joined = _joined(prev, draft.content)
                if joined is not prev:
                    out[-1] = (start, m.end(), joined)
                    short, followed = None, True
                    continue
            elif short is not None and len(out) < MAX_STATEMENTS:
                if (span := _rescued(short, m.end(), draft.content, at)) is not None:
                    out.append(span)
                    follows, short = True, None
                    continue
            if not follows and before is not None and len(out) < MAX_STATEMENTS and (
                    joined := _joined_after(before[1], draft)) is not draft:
                # 4. The sentence before kept nothing but names what this one leans on: it goes in
                #    first, as said ("That picture is from MinaLima. They created all the props …,
                #    and User loves their work"), where the question would say less.
                out.append((before[0], m.end(), joined))
                follows, short = True, None
                continue
            if not follows and (aside := _ASIDE_FIRST.match(draft.content)):
                # "It was tough, but I finished my first marathon": the aside goes, the statement stays
                draft = dataclasses.replace(draft, content=draft.content[aside.end():])
        if draft is not None and not cjk and (hinge := _HINGE.match(draft.content)):
            # "But User is determined to make a difference": the sentence stands alone, its hinge
            # to the one before does not
            draft = dataclasses.replace(draft, content=draft.content[hinge.end():])
        if draft is not None:
            if len(out) >= MAX_STATEMENTS:
                break
            if reply_to and i < REPLY_SENTENCES and not cjk and _leans_on_context(draft.content):
                # 3. (above) Nothing in this turn names what it leans on: the question it answers, or
                #    the remark it replies to, does most often. Only near the turn's start: later
                #    sentences lean on the turn itself.
                #    Written in at the end, after any follow-up sentence has joined it.
                replying.append(len(out))
            out.append((m.start(), m.end(), draft))
            follows, short = not cjk, None
            continue
        more = _follow_up(sentence) if not cjk and (follows or short is not None) else None
        if more and follows:
            # "I took that pic on a hike near Fort Wayne. The sunset was just incredible.": a sentence
            # about what the statement before it told joins it, so the fact carries its details
            start, _, prev = out[-1]
            out[-1] = (start, m.end(), _joined(prev, more))
            followed = True
        elif more and len(out) < MAX_STATEMENTS:
            # "I love this series. It has adventures, magic and great characters.": too short alone,
            # but the sentence after says what it is about (ignores: `more` without `follows` means short is set)
            if (span := _rescued(short, m.end(), more, at)) is not None:  # type: ignore[arg-type]
                out.append(span)
            else:
                more = None   # joined nothing: this sentence may still name what the next leans on
        follows = False
        short = None if (more or cjk) else (m.start(), sentence)
        named = None if (more or cjk) else ((m.start(), ante) if (ante := _antecedent(sentence)) else None)
        if not more and not cjk:
            unkept.append((m.start(), sentence))
    for k in replying:
        start, end, draft = out[k]
        out[k] = (start, end, dataclasses.replace(draft, content=with_reply(draft.content, reply_to or "", MAX_CONTENT_CHARS)))
    read = [_with_context(span, unkept) for span in out]
    if all(names for _, names in read) or not any(names for _, names in read):
        # 6. … where the turn keeps nothing else, what it said stays: its words are all that finds
        #    this turn again (LoCoMo from turns: not storing these either cost R@10 63.2 → 61.4).
        return [span for span, _ in read]
    # 7. Beside what the turn does keep, it is no memory of its own: it goes into the statement
    #    before it (else after it), as the sentence it follows in the turn ("User ran their first
    #    marathon in May. It keeps User going"); not storing it cost R@10 63.2 → 62.9.
    kept: list[tuple[int, int, FactDraft]] = [span for span, names in read if names]
    for span, names in read:
        if names:
            continue
        earlier = [k for k, kept_span in enumerate(kept) if kept_span[0] < span[0]]
        k = earlier[-1] if earlier else 0
        first, until, host = kept[k]
        joined = _joined(host, span[2].content) if earlier else _joined_after(span[2].content, host)
        kept[k] = (min(first, span[0]), max(until, span[1]), joined)
    return kept


# Words to the other speaker: a name opening the sentence, praise or wishes for what they said
_TALK_TO_OTHER = re.compile(r"^\s*[A-Z][a-z]+,|(?i:\b(?:sounds?|sounded|good luck|best of luck|appreciate|"
                            r"congrat\w*|must have been|must've been|glad|happy for|proud of|thanks|thank you)\b)")
MAX_CONTEXT_CHARS = 160   # a sentence of the turn kept beside a statement, as a question is (reply_context)


def _with_context(span: tuple[int, int, FactDraft],
                  unkept: list[tuple[int, str]]) -> tuple[tuple[int, int, FactDraft], bool]:
    """5. A statement that, read with all it could lean on so far (the sentence before, the question
    it answers), still names nothing of what it speaks of (references.unresolved): the turn's
    nearest sentence that kept nothing but says something goes beside it, as a question does
    ("It brings User so much happiness (context: Here's to a good time at the café last weekend -
    they even had thoughtful signs like this)"); if even that names nothing, it is not stored: it
    would tell a later reader nothing (6., in the caller: unless the turn keeps nothing else). The
    nearest sentence before it first, else after it. Returns (the span, whether it names what it
    speaks of)."""
    start, end, draft = span
    if not draft.rule.startswith("statement.en.") or unresolved(draft.content) is None:
        return span, True
    before = [s for at, s in reversed(unkept) if at < start]
    after = [s for at, s in unkept if at >= end]
    for sentence in (*before, *after):
        # what _antecedent would name, never words to the other speaker ("Caroline, it's got to be
        # tough …", "Best of luck in the tournament", "That book sounds awesome")
        said = _antecedent(sentence)
        if said is None or len(said) > MAX_CONTEXT_CHARS or _TALK_TO_OTHER.search(sentence):
            continue
        content = with_reply(draft.content, said, MAX_CONTENT_CHARS, label="context")
        if unresolved(content) is None:
            return (start, end, dataclasses.replace(draft, content=content)), True
        break
    return span, False


def _leans_on_context(content: str) -> bool:
    """Does a statement need the sentence before, or the question it answers, to be understood?"""
    return points_back(content) or unresolved(content) is not None


class _Piece:
    """A part of a sentence, with the match interface statement_spans reads (group(0), start, end)."""
    __slots__ = ("text", "_start")

    def __init__(self, text: str, start: int):
        self.text, self._start = text, start

    def group(self, _: int = 0) -> str:
        return self.text

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._start + len(self.text)


_CLAUSE = re.compile(r"[^,，;；、]+[,，;；、]*")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_LATIN_START = re.compile(r"^[\s\W\d]*[A-Za-z]")


def _latin(clause: str) -> bool:
    """Is this clause English, though it may name a Chinese place or person ("I work as a data
    analyst in 深圳", "My wife 韩梅梅 is a teacher", "平时 I play basketball on weekends")? It has
    several Latin words, more of them than Chinese words (two characters a word)."""
    words = len(_LATIN_WORD.findall(clause))
    return words >= 2 and (words * 2 > len(_CJK.findall(clause)) or
                           (_LATIN_START.match(clause) is not None and words >= 3))


# Coordinated first-person clauses are separate propositions ("I live in Lisbon and I play the
# violin"): each is decided on its own, so a move supersedes the city without the violin.
_EN_JOIN = r"and|but|and now|but now|and also"   # what joins two first-person clauses
_EN_I = r"I(?:['’](?:m|ve|ll|d))?"               # the subject each of them starts with
_EN_COMPOUND = re.compile(r"(?:,[ \t]{0,3}|;[ \t]{0,3}|[ \t]{1,3})(?:(?:" + _EN_JOIN + r")[ \t]{1,3})?"
                          r"(?=" + _EN_I + r"\s)"
                          r"(?<!\bthat )(?<!\bwhere )(?<!\bwhen )(?<!\bbecause )(?<!\bif )(?<!\bso )")

# A cut-off clause (as _EN_COMPOUND cuts: its join, then "I") with one word after its subject, or
# a verb and a pronoun: "and I won", "I did", "and I love it", "but I miss them"
_TOO_LITTLE = re.compile(r"(?i)^[\s,;]*(?:(?:" + _EN_JOIN + r")\s+)?" + _EN_I + r"\s+"
                         r"(?:(?:really|just|totally|so|also|still|absolutely)\s+)?"
                         r"[\w'’-]+(?:\s+(?:it|them|that|this|those|these|him|her|one))?[\s!.?…~]*$")


def _en_clauses(m: re.Match[str] | _Piece) -> Iterator[re.Match[str] | _Piece]:
    """The first-person clauses of an English sentence (itself when it has one)."""
    sentence = m.group(0)
    cuts = [c.start() for c in _EN_COMPOUND.finditer(sentence)
            if c.group(0).strip(" ,;") or c.group(0).strip() in (",", ";")]
    cuts = [c for c in cuts if c > 0 and _FP_CLAUSE.search(sentence, 0, c) and len(sentence[:c].split()) >= 3]
    # a clause that says too little alone stays with the one before ("…, and I won!", "…, and I
    # love it"): cut off, "And User won" is a fragment
    ends = [*cuts[1:], len(sentence)] if cuts else []
    cuts = [c for c, e in zip(cuts, ends, strict=True) if not _TOO_LITTLE.match(sentence[c:e])]
    yield from _cut(m, cuts)



def _cut(m: re.Match[str] | _Piece, cuts: list[int]) -> Iterator[re.Match[str] | _Piece]:
    """`m` itself when there is no cut, else its pieces between the cuts (offsets kept)."""
    if not cuts:
        yield m
        return
    sentence = m.group(0)
    bounds = [0, *cuts, len(sentence)]
    for a, b in zip(bounds, bounds[1:]):
        yield _Piece(sentence[a:b], m.start() + a)


# "我叫王芳，我住在北京，我是一名老师": each clause that names the user again is its own proposition.
_ZH_COMPOUND = re.compile(r"[，,；;](?=\s*(?:我(?!们)|而且我|并且我|但是我|不过我|可是我|现在我))")


def _zh_clauses(m: re.Match[str] | _Piece) -> Iterator[re.Match[str] | _Piece]:
    sentence = m.group(0)
    yield from _cut(m, [c.end() for c in _ZH_COMPOUND.finditer(sentence)])


_FP_CLAUSE = re.compile(r"(?<![\w'’])(?:I|I['’](?:m|ve|ll|d)|[Ww]e)(?![\w'’])")   # a first-person subject


def _segments(text: str) -> Iterator[tuple[re.Match[str] | _Piece, bool]]:
    """Sentences, each with whether it is Chinese; a sentence that mixes Chinese and English clauses
    ("我叫李雷, I work as a data analyst in 深圳", "我喜欢游泳, but I really hate running") is read
    clause by clause, each in its own language, consecutive clauses of one language together."""
    for m in _SENTENCE.finditer(text):
        sentence = m.group(0)
        if not _CJK.search(sentence):
            for piece in _en_clauses(m):
                yield piece, False
            continue
        if _LATIN_WORD.search(sentence) is None:
            for piece in _zh_clauses(m):
                yield piece, True
            continue
        parts: list[list[Any]] = []                 # [start, end, is_chinese]
        for c in _CLAUSE.finditer(sentence):
            zh = _CJK.search(c.group(0)) is not None and not _latin(c.group(0))
            if parts and parts[-1][2] == zh:
                parts[-1][1] = c.end()
            else:
                parts.append([c.start(), c.end(), zh])
        if len(parts) == 1:
            yield m, parts[0][2]
            continue
        for a, b, zh in parts:
            piece = _Piece(sentence[a:b], m.start() + a)
            if zh:
                for p in _zh_clauses(piece):
                    yield p, True
            else:
                for p in _en_clauses(piece):
                    yield p, False


def _guarded(fn: Callable[..., FactDraft | None], sentence: str, at: datetime | None, **kw: Any) -> FactDraft | None:
    try:
        return fn(sentence, at, **kw)
    except Exception:   # a heuristic's bug must not stop the extractor (law 6); the turn keeps its other facts
        log.exception("statement extraction failed on one sentence (%d chars); skipped", len(sentence))
        return None


_FENCE = re.compile(r"```[^`]*(?:`(?!``)[^`]*)*(?:```|$)")       # a fenced code block (to its end, or the text's)
_CODE_CHARS = frozenset("{}()[];=<>_/\\`$#|*&")


def _looks_like_code(sentence: str) -> bool:
    """Code, logs and stack traces are not statements about anyone: too many symbols for prose."""
    n = sum(1 for c in sentence if c in _CODE_CHARS)
    return n >= 3 and n * 12 > len(sentence)


_FOLLOW_UP = re.compile(r"^(?:It|It's|Its|That|That's|This|These|Those|They|They're|Their|The|He|He's|His|She|She's|Her|"
                        r"There|Everyone|Everything|Everybody)\b")


# A statement whose subject points back: "It keeps User motivated", "They're User's biggest support",
# "This has been great for User" (a bare demonstrative: "This necklace is …" names its subject)
# "It was tough, but User …": an aside about the antecedent, then a statement of its own
_ASIDE_FIRST = re.compile(r"^(?:It|It's|That|That's|This)\b[^,.;]{0,40}, (?:but|and|yet|so) (?=User\b)")
_HINGE = re.compile(r"^(?:And|But|So|Plus|Also),? (?=User\b)")


def _talk_free_body(sentence: str) -> str | None:
    """The sentence as the user's own words about something (lead and trailing filler stripped),
    or None for a question, filler, or words to the other speaker: what both a statement that
    points back and a sentence that may name its antecedent must first be."""
    s = sentence.strip().replace("’", "'").replace("‘", "'")
    if not s or s.endswith("?"):
        return None
    body = _strip_lead(_TRAILING_FILLER.sub("", s.rstrip(".!…~ ")).strip())
    if not body or _FILLER_START_EN.match(body):
        return None
    toks = frozenset(_TOKEN.findall(body.lower()))
    if not _YOU_WORDS.isdisjoint(toks) or (not _FILLER_ANY_GATE.isdisjoint(toks) and _FILLER_ANY_EN.search(body)):
        return None
    return body


def _follow_up(sentence: str) -> str | None:
    body = _talk_free_body(sentence)
    if body is None or not _FOLLOW_UP.match(body) or _content_words_en(body.lower()) < 3:
        return None
    return third_person_en(body)


# Thanks and praise without the first person ("Appreciate the support.", "Truly inspiring.") and
# words to the other speaker by name ("That's sweet, Mel."): they name nothing the next one leans on.
_NOT_ANTECEDENT = re.compile(r"(?i)^(?:appreciate|appreciated|thanks|thank|truly|totally|absolutely|definitely|"
                             r"exactly|wow|aww+|omg|congrats|congratulations|looking forward)\b")
_VOCATIVE_END = re.compile(r",\s*[A-Z][a-z]+$")


def _antecedent(sentence: str) -> str | None:
    """A sentence of the turn that kept no statement but may name what the next one points back to
    ("That picture is from MinaLima." before "They created all the props …, and I love their
    work"; "Yeah, our trip got off to a bad start." before "That was a reminder …"), in the third
    person; None for a question, filler ("Thanks, Nate!", "No problem!"), words to the other
    speaker, or too few content words to name anything."""
    body = _talk_free_body(sentence)
    if body is None or _NOT_ANTECEDENT.match(body) or _VOCATIVE_END.search(body) or _content_words_en(body.lower()) < 2:
        return None
    return third_person_en(body)


def _rescued(short: tuple[int, str], end: int, more: str, at: datetime | None) -> tuple[int, int, FactDraft] | None:
    """A sentence too short alone (`short`: its start and text), read leniently and joined with
    `more`, the sentence after it that says what it is about; None when it says nothing even so."""
    rescued = _guarded(_statement_en, short[1], at, relaxed=True)
    return None if rescued is None else (short[0], end, _joined(rescued, more))


def _joined_after(before: str, draft: FactDraft) -> FactDraft:
    """`draft` with the sentence that names its antecedent in front; unchanged if too long."""
    joined = before[:1].upper() + before[1:] + ". " + draft.content
    return draft if len(joined) > MAX_CONTENT_CHARS else dataclasses.replace(draft, content=joined)


def _joined(draft: FactDraft, more: str) -> FactDraft:
    content, suffix = draft.content, ""
    if draft.event_date and content.endswith(")") and " (" in content:
        content, _, suffix = content.rpartition(" (")
        suffix = " (" + suffix
    joined = content + ". " + more + suffix
    if len(joined) > MAX_CONTENT_CHARS:
        return draft
    return dataclasses.replace(draft, content=joined)


def extract_statements(text: str, at: datetime | None = None, reply_to: str | None = None) -> list[FactDraft]:
    """Every sentence of a user turn that says something about the speaker or their world, as a
    third-person fact; `at` is the turn's event time, used to resolve "last week", "昨天", …"""
    return [d for _, _, d in statement_spans(text, at, reply_to)]
