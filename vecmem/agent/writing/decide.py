"""The write decision, one pure function: ``decide(statement, candidates) -> Plan``.

Similarity finds the candidates (the bank gathers them: bank/resolving.py); a contradiction decides. In order:

1. **The same claim again** -> ``unchanged``: equal after normalisation (case, width, punctuation, contractions,
   我/用户 and I/the user: ``claims.normalized``), or the same claims (holder, attribute, value, polarity, time)
   in other words ("我在腾讯上班" / "我在腾讯工作") -- and in either case no value differs: a number, name,
   identifier, code span, version, time or polarity that one has and the other lacks (``claims.value_tokens``)
   makes two statements different however close their vectors are. Closeness never makes a duplicate.
2. **A contradiction** -> ``replace`` (``timeline`` when the statement tells a change over time): a claim of
   the new statement contradicts a claim of a candidate when both are about the same holder and attribute and
   - the new one places the old value in the past ("I used to live in Berlin" after "I live in Berlin");
   - or one denies what the other affirms ("I'm not vegetarian anymore", "I don't live in Hangzhou", "I quit
     smoking" after "I smoke a pack a day");
   - or the values differ and the attribute holds one value at a time (where one lives or works, an age, the
     time of a recurring activity, the language of the replies, "my X is Y"), or the statement says it changed
     ("switched to", "改用", "现在…了") for an attribute that holds several (the tools one uses).
   Claims about different holders, additive statements and the values of a many-valued attribute without a
   change ("I also like Rust") never contradict. Conclusions record what was established then: never replaced
   (a new conclusion may replace a fact: "turns out I'm not allergic to penicillin").
   A candidate of several facts of which the new statement revises some keeps the rest (``rewrite``:
   "我平时用 VS Code 写代码，终端用 zsh" -> "我平时终端用 zsh" after "我现在用 Cursor 写代码了").
3. Anything else -> ``add``. When unsure, both are kept: a missed update is fixed by the next statement, a wrong
   replacement loses what the user said.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace as with_fields

from vecmem.agent import rules
from vecmem.agent.writing import topics
from vecmem.agent.writing.claims import (
    Claim,
    claims,
    content_words,
    normalized,
    states_change,
    value_tokens,
)
from vecmem.agent.writing.claims import mentions as claims_mentions
from vecmem.agent.writing.revision import without_claims
from vecmem.bank.resolving import Known, Plan
from vecmem.models import MemoryRecord

__all__ = ["decide", "same_statement", "contradicts", "single_valued"]

# the words in which two wordings of the same claims may differ: the verbs and nouns that say which attribute a
# value is of ("I reside in Paris" / "I live in Paris", "我在腾讯上班" / "我在腾讯工作"), in the normal form
PREDICATE_WORDS = frozenset("""
live reside resid based stay located work employ employed job call called name named nam be age old year years
叫 名 字 称 呼 工 作 上 班 任 职 住 居 生 活 今 年 岁 是 在
""".split())


def single_valued(attribute: str) -> bool:
    return (attribute in topics.SINGLE_VALUED or attribute == "diet"
            or attribute.startswith(("schedule:", "has:", "does:", "how:", "language of ")) or attribute.endswith(":"))


def _same_value(left: str, right: str) -> bool:
    return left == right or (min(len(left), len(right)) >= 2 and (left in right or right in left))


# what a team shares rather than each of its members chooses: a statement that names no subject may be about it
TEAM_SLOTS = frozenset({"database", "ci", "issue tracker", "chat app", "cloud"})


def _same_holder(new: Claim, old: Claim) -> bool:
    """The same holder; a statement that names no subject may be about the team's tools ("需求管理以后都用 Linear"
    after "我们用 Jira 管理需求"), never its other choices ("以后都用 JavaScript" after "我们团队用 Go")."""
    if new.holder == old.holder:
        return True
    return ({new.holder, old.holder} == {"user", "group"} and (new.elided or old.elided)
            and new.attribute.split("@")[0] in TEAM_SLOTS)


def _same_attribute(new: str, old: str) -> bool:
    """The same attribute; a choice said without a part of the day or a place ("I don't drink coffee anymore")
    covers the ones said with one ("I drink coffee every morning")."""
    return new == old or ("@" not in new and old.split("@")[0] == new)


def contradicts(new: Claim, old: Claim, *, change: bool, left: frozenset[str] = frozenset()) -> bool:
    """Whether the new claim makes the old one no longer current (the module docstring, step 2). ``left``: the
    values of the attribute the new statement says it leaves ("switched from VS Code to Cursor"): a change then
    revises those only, not another value of a many-valued attribute ("平时用 Neovim 写 Python")."""
    if not _same_holder(new, old) or not _same_attribute(new.attribute, old.attribute) or old.past:
        return False
    same = _same_value(new.value, old.value)
    if new.past:  # "used to X": X is no longer current
        return same and not new.negated and not old.negated
    if new.negated != old.negated:
        return same
    if new.negated or same:
        return False
    if new.attribute.startswith("schedule:") and ":" not in new.value + old.value:
        return change  # days alone: "on Mondays" and "on Thursdays" may both hold
    if single_valued(new.attribute):
        return True
    return change and (not left or any(_same_value(old.value, value) for value in left))


def same_statement(new: str, old: str) -> str | None:
    """Why ``new`` states the same claim as ``old`` (the module docstring, step 1), or None."""
    if _values_differ(new, old):
        return None
    if normalized(new) == normalized(old):
        return "the same statement"
    if content_words(new) == content_words(old):
        return "the same words in another order"
    new_claims, old_claims = claims(new), claims(old)
    if not new_claims or {c.key for c in new_claims} != {c.key for c in old_claims}:
        return None
    if {_surface(new, c) for c in new_claims} != {_surface(old, c) for c in old_claims}:
        return None  # "black tea" and "jasmine tea" are both tea to the slot, not to the user
    new_words, old_words = content_words(new), content_words(old)
    if not (new_words ^ old_words) <= PREDICATE_WORDS:  # "tea first" / "tea second"; "maybe plays the cello"
        return None
    return "the same claims in other words"


def _surface(text: str, claim: Claim) -> str:
    return " ".join(text[claim.span[0]:claim.span[1]].casefold().split())


def _values_differ(new: str, old: str) -> bool:
    """One names a value the other does not: a number, identifier, code span, time, polarity; a name counts only
    when the other does not write it at all (in lower case: "VS Code" / "vs code")."""
    mine, theirs = value_tokens(new), value_tokens(old)
    flat = {text: "".join(normalized(text).split()) for text in (new, old)}
    for token in mine ^ theirs:
        if token[:1] in "@#~`¬" or any(ch.isdigit() for ch in token):
            return True
        other = flat[old] if token in mine else flat[new]
        if "".join(token.split()) not in other:
            return True
    return False


def _revised(new_claims: Sequence[Claim], old: MemoryRecord, *, change: bool) -> list[Claim]:
    """The claims of ``old`` that the new statement contradicts."""
    old_claims = list(claims(old.content))
    for claim in new_claims:  # "I quit smoking": what the old memory says its holder does
        if claim.attribute.startswith("does:") and (said := claims_mentions(old.content, claim)) is not None:
            old_claims.append(said)
    left = {attribute: frozenset(c.value for c in new_claims if c.negated and c.attribute == attribute)
            for attribute in {c.attribute for c in new_claims}}
    gone = [old_claim for old_claim in old_claims
            if any(contradicts(new, old_claim, change=change, left=left[new.attribute]) for new in new_claims)]
    if any(not claim.attribute.startswith("does:") for claim in gone):  # an attribute says it more precisely
        gone = [claim for claim in gone if not claim.attribute.startswith("does:")]
    deeds = [claim.span for claim in gone if claim.attribute.startswith("does:")]
    # what the clause of a deed that ended says goes with it ("I play tennis on Saturdays": its day too)
    return gone + [claim for claim in old_claims if claim not in gone
                   and any(start <= claim.span[0] < end for start, end in deeds)]


def _why(new_claims: Sequence[Claim], gone: Sequence[Claim], memory_id: str) -> str:
    old = gone[0]
    new = next((c for c in new_claims if c.attribute == old.attribute), new_claims[0])
    holder = "" if old.holder == "user" else f"{old.holder}'s "
    if new.past:
        return f"revises {memory_id}: {holder}{old.attribute} {old.value} is now in the past"
    if new.negated != old.negated:
        return f"revises {memory_id}: {holder}{old.attribute} no longer {old.value}"
    return f"revises {memory_id}: {holder}{old.attribute} is now {new.value} (was {old.value})"


def _leftover(text: str, gone: list[Claim], new_text: str) -> str | None:
    """What of a memory of several facts stays true once ``gone`` is taken out, if anything worth keeping."""
    rest = without_claims(text, gone)
    if rest is None or rest == text or rules.information_units(rest) < rules.MIN_INFORMATION:
        return None
    if not content_words(rest) - content_words(new_text) - {w for c in gone for w in content_words(c.value)}:
        return None
    if any(claims_overlap(rest, claim) for claim in gone):
        return None
    return rest


def _says_more(old: MemoryRecord, gone: list[Claim], new_claims: Sequence[Claim]) -> bool:
    """The old memory makes a claim the new statement neither revises nor restates ("平时用 Neovim 写 Python" after
    "switched to Cursor": the Python)."""
    restated = {(claim.holder, claim.attribute.split("@")[0]) for claim in new_claims}
    return any(claim not in gone and not claim.implied and (claim.holder, claim.attribute.split("@")[0]) not in restated
               for claim in claims(old.content))


def _substituted(old: str, gone: list[Claim], new: str, new_claims: Sequence[Claim]) -> str | None:
    """The old memory with the new value in place of the one revised, when one tool or language of a statement
    that says more changed ("写 Python 的时候用 unittest 写测试" -> "写 Python 的时候用 pytest 写测试")."""
    if len(gone) != 1 or gone[0].attribute.split("@")[0] not in topics.SLOTS:
        return None
    replacement = next((c for c in new_claims if c.attribute == gone[0].attribute and not c.negated and not c.past), None)
    if replacement is None:
        return None
    start, end = gone[0].span
    return old[:start] + new[replacement.span[0]:replacement.span[1]] + old[end:]


def claims_overlap(text: str, gone: Claim) -> bool:
    return any(claim.attribute == gone.attribute and claim.holder == gone.holder and claim.value == gone.value
               for claim in claims(text))


def decide(record: MemoryRecord, candidates: Sequence[Known]) -> Plan:
    """The plan for ``record`` against ``candidates`` (the module docstring)."""
    text = record.content
    conclusion = record.type == "conclusion"
    for known in candidates:
        old = known.record
        if (old.type == "conclusion") != conclusion:
            continue
        if why := same_statement(text, old.content):
            return Plan("unchanged", f"already remembered as {old.id}: {why}", same_as=old.id)
    new_claims = claims(text)
    if not new_claims:
        return Plan("add", "new information")
    said = claims(record.context) if record.context else ()
    if said and all(claim.elided for claim in said if claim.holder == "user"):  # the user named no subject: the
        # third person's "用户" in front is the rewrite's, not theirs ("数据库已经迁到 TiDB 了")
        new_claims = tuple(with_fields(c, elided=True) if c.holder == "user" else c for c in new_claims)
    change = states_change(text) or (bool(record.context) and states_change(record.context))
    replace: list[str] = []
    rewrite: list[tuple[str, str]] = []
    reasons: list[str] = []
    for known in candidates:
        old = known.record
        if old.type == "conclusion" or old.id == record.id:
            continue
        gone = _revised(new_claims, old, change=change)
        if not gone:
            continue
        rest = _leftover(old.content, gone, text)
        if rest is None and _says_more(old, gone, new_claims):
            rest = _substituted(old.content, gone, text, new_claims)
            if rest is None:
                continue  # it also says what the new statement does not restate, and cannot be cut: keep both
        reasons.append(_why(new_claims, gone, old.id))
        if rest is None:
            replace.append(old.id)
        else:
            rewrite.append((old.id, rest))
    if not replace and not rewrite:
        return Plan("add", "new information: it contradicts no memory")
    timeline = any(claim.past for claim in new_claims)
    return Plan("timeline" if timeline else "replace", "; ".join(reasons), replace=tuple(replace),
                rewrite=tuple(rewrite))
