"""The patients allocated to each arm of an abstract, with the sentence saying so (`arm_sizes`), and the sizes of one
arm (`sizes_of`): the denominators `extract` turns a stated count or a percentage into events / total with."""

from __future__ import annotations

import re

from ra_agent.evidence.pico.text import POP_NOUN
from ra_agent.evidence.synthesis.mentions import Mention, Words, arm_label, arm_mentions, distinct_arms
from ra_agent.evidence.synthesis.numbers import PER_PROTOCOL, Number, normalise_text, numbers_in

__all__ = ["Sizes", "arm_sizes", "sizes_of"]


Sizes = dict[str, list[tuple[int, str]]]  # arm label -> the sizes stated for it, with their sentences, in order


def add_size(sizes: Sizes, a: Mention, n: int, sentence: str) -> None:
    found = sizes.setdefault(arm_label(a.drug, a.dose), [])
    if n > 1 and all(n != m for m, _ in found):
        found.append((n, sentence))


def arm_sizes(units: list[str], words: Words) -> Sizes:
    """Arm label → the patients allocated to it (with the sentence saying so), from allocation sentences: "(n = 188)"
    after an arm, "102 patients received rabeprazole 20 mg", "pantoprazole n=226", "(62 taking lansoprazole", "221
    and 212 patients, respectively", "99 patients were randomized to LMWH and 87 to placebo", "group QD: 55
    patients", "769 patients in the nadroparin group", "(combination group)" closing the clause that allocates 27
    patients, "155 patients in each treatment group", the patients of a crossover trial (each takes every arm);
    then the denominators of count pairs ("30/126 for placebo"). Per-protocol and completion counts are not arm sizes.
    An arm may have several (randomised, analysed): a percentage picks the one it reproduces."""
    sizes: Sizes = {}
    pairs: list[tuple[Mention, int, str]] = []
    crossover = any(re.search(r"cross-?over", u, re.I) for u in units)
    for raw in units:
        text = normalise_text(raw)
        arms = arm_mentions(text, words)
        if crossover and re.search(r"randomi[sz]|cross-?over", text, re.I) and not PER_PROTOCOL.search(text):
            m = re.search(rf"\b(\d+)\s+(?:[A-Za-z-]+\s+|\([^()]*(?:\([^()]*\)[^()]*)*\)\s*){{0,6}}?{POP_NOUN}\b", text)
            for a in distinct_arms(arm_mentions(" ".join(normalise_text(u) for u in units), words)) if m else ():
                add_size(sizes, a, int(m.group(1)), raw) if m else None
        if not arms:
            continue
        for m in re.finditer(r"\bn\s*=\s*(\d+)", text, re.I):
            named_after = [a for a in arms if re.fullmatch(r"\s*in (?:the|each)\s+", text[m.end() : a.start])]
            if named_after:  # "(n=166 in the pantoprazole group, n=162 in the omeprazole group)"
                add_size(sizes, named_after[0], int(m.group(1)), raw)
                continue
            before = [a for a in arms if a.end <= m.start() and m.start() - a.end < 150]
            if before and not re.search(r"\bn\s*=", text[before[-1].end : m.start()], re.I):
                add_size(sizes, before[-1], int(m.group(1)), raw)
        for m in re.finditer(r"\b(\d+)\s+(?:patients|subjects)\b(?:\s+with\s+[\w\s-]{0,40}?)?\s*(?:received|were given|"
                             r"were treated with|taking|on|given|to|were randomi[sz]ed to(?: receive)?|were (?:randomly )?"
                             r"(?:assigned|allocated) to|in (?:the|each)|(?:were )?included in (?:the )?)?\s+(?:either\s+)?"
                             r"(?:with\s+)?(?:group\s+)?|\band\s+(\d+)\s+to\s+", text):  # fmt: skip
            after = [a for a in arms if a.start == m.end()]
            every = (
                after
                and re.match(r"\s*(?:,|or|and)\s", text[after[0].end :])
                and any(
                    a.start > after[0].end
                    and re.fullmatch(r"\s*(?:,|or|and)\s+(?:to\s+)?", text[after[0].end : a.start])
                    for a in arms
                )
            )  # "113 patients were randomized to nadroparin or placebo": the trial, not one arm
            every = every or re.search(r"\beither\s+(?:with\s+)?(?:group\s+)?$", m.group(0))  # "received either A or B"
            if after and not every and not PER_PROTOCOL.search(text[max(0, m.start() - 60) : m.end()]):
                add_size(sizes, after[0], int(m.group(1) or m.group(2)), raw)
        for m in re.finditer(r"[(,]\s*(\d+)\s+(?:taking|receiving|on|given)\s+", text):
            after = [a for a in arms if a.start == m.end()]
            if after:
                add_size(sizes, after[0], int(m.group(1)), raw)
        for (
            a
        ) in arms:  # "pantoprazole (PANT) 40 mg (111 patients," / "ranitidine (RAN) 300 mg (111, aged" / "group QD: 55"
            m = re.match(r"\s*(?:daily|once daily|o\.?d\.?|b\.?i\.?d\.?)?\s*\(\s*(\d+)\s*(?:patients)?\s*[,;)]|"
                         rf"\s*:\s*(\d+)\s+{POP_NOUN}", text[a.end :])  # fmt: skip
            if m and int(m.group(1) or m.group(2)) > 3:
                add_size(sizes, a, int(m.group(1) or m.group(2)), raw)
        for m in re.finditer(r"\b(\d+)\s+(?:patients|subjects)\s+were\s+randomi[sz]ed\s+to\s+[^;.]{0,120}?\((?=[^()]*group\))",
                             text):  # fmt: skip
            inside = [a for a in arms if a.start > m.end() - 1 and a.start - m.end() < 20]
            if inside:  # "27 patients were randomized to continue OHAs … (combination group)"
                add_size(sizes, inside[0], int(m.group(1)), raw)
        m = re.search(r"\b(\d+)\s+and\s+(\d+)\s+(?:patients|subjects),?\s+respectively", text)
        distinct = distinct_arms(arms)
        if m and len(distinct) == 2:
            for a, n in zip(distinct, (m.group(1), m.group(2)), strict=True):
                add_size(sizes, a, int(n), raw)
        for number in numbers_in(text):
            for a in nearest_after(text, number, arms):
                if number.total is not None and not PER_PROTOCOL.search(text):
                    pairs.append((a, number.total, raw))
    each = next((m for u in units if (m := re.search(r"\b(\d+)\s+(?:patients|subjects)\s+in each (?:treatment )?(?:group|arm)",
                                                     normalise_text(u)))), None)  # fmt: skip
    for (
        a,
        n,
        raw,
    ) in pairs:  # the denominators of count pairs: after the allocation sentences, or first when they are one
        found = sizes.setdefault(arm_label(a.drug, a.dose), [])
        same = [c for c in found if c[0] == n]
        if same:
            found.remove(same[0])
            found.insert(0, same[0])
        else:
            add_size(sizes, a, n, raw)
    if each:
        for a in distinct_arms(arm_mentions(" ".join(normalise_text(u) for u in units), words)):
            add_size(sizes, a, int(each.group(1)), each.string)
    return {k: v for k, v in sizes.items() if v}


def nearest_after(text: str, n: Number, arms: list[Mention]) -> list[Mention]:
    """The arm a count pair is over when it names it right after ("30/126 for placebo", "6 of 21 patients in the
    nadroparin group")."""
    if n.total is None:
        return []
    after = [a for a in arms if a.start > n.start and re.fullmatch(r"[^;(]{0,40}?\b(?:for|in|on|with|taking|receiving|"
                                                                    r"treated with|after)\s+(?:the\s+)?",
                                                                    text[n.start : a.start])]  # fmt: skip
    return after[:1]


def sizes_of(label: str, drug: str, sizes: Sizes, doses: dict[str, set[str]]) -> list[tuple[int, str]]:
    """The sizes stated for an arm, else (`_only_size`) for its drug named without the dose."""
    return sizes.get(label) or _only_size(drug, sizes, doses) or []


def _only_size(drug: str, sizes: Sizes, doses: dict[str, set[str]]) -> list[tuple[int, str]] | None:
    """The arm sizes of a drug named without its dose, when the abstract names one dose of it and sizes one arm."""
    if len(doses.get(drug, ())) > 1:
        return None
    labels = {arm_label(drug, d) for d in (*doses.get(drug, ()), "")}
    found = [
        v for k, v in sizes.items() if k in labels or (k.startswith(f"{drug} ") and k[len(drug) + 1 :][:1].isdigit())
    ]
    return found[0] if len(found) == 1 else None
