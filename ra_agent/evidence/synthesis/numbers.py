"""The numbers of an abstract's sentences, before any arm is named: count pairs, stated counts and percentages, "mean
± dispersion" values, time points and outcome classes with the abstract's words for them (read by `extract`).

What is a result and what is not (thresholds, ranges, demographics, effect measures, CI and P parentheses,
allocation parentheses, "from A to B" baselines) is decided here; see `extract`'s docstring for the whole reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ra_agent.evidence.pico.text import NUMBER, parse_number
from ra_agent.evidence.synthesis.arms import DRUG

__all__ = ["HARMS", "OUTCOME_CLASSES", "PER_PROTOCOL", "Number", "continuous_values", "count_from_percent",
           "count_list", "dispersion", "normalise_text", "numbers_in", "outcome_class", "outcome_words", "time_points"]  # fmt: skip

# "matching ranitidine placebo", "lansoprazole placebo": a dummy, not an arm
_DUMMY = re.compile(rf"\b(?:matching|identical|dummy)\s+(?:{DRUG}\s+)?placebos?\b|\b{DRUG}[\s-]+placebos?\b|"
                    r"\bplacebo (?:at|in the) (?:bedtime|evening|morning)\b", re.I)  # fmt: skip
_WORD_NUMBER = re.compile(NUMBER, re.I)
_PERCENT_WORD = re.compile(r"(?<=\d)\s*(?:per ?cent|pct)\b", re.I)

# brackets may stand for parentheses: "13 [3%]"; no part of a decimal ("4.8/8.7%" holds no 8/8)
_PAIR = re.compile(
    r"(?<![\w.])(?P<e>\d+)\s*(?:\(\s*(?P<p1>\d+(?:\.\d+)?)\s*%\s*\)\s*)?(?:/|out of|of)\s*(?:the\s+)?(?P<t>\d+)\b(?!\.\d)"
    r"(?:\s*(?:patients|subjects|cases))?(?:\s*[(\[]\s*(?P<p2>\d+(?:\.\d+)?)\s*%\s*[)\]])?"
)
_COUNT_PERCENT = re.compile(r"\b(?P<e>\d+)\s*(?:(?:patients|subjects|children|cases)\s*)?[(\[]\s*(?P<p>\d+(?:\.\d+)?)\s*%\s*[)\]]"
                            r"(?!\s*(?:/|out of|of)\s*(?:the\s+)?\d)")  # fmt: skip
# a percentage that states a threshold or a change, not a share of an arm ("by more than 20%", "a 50% drop")
_THRESHOLD = re.compile(r"\b(?:more|less|greater|fewer|higher|lower) than\s+\d+(?:\.\d+)?\s*%|\b(?:at least|up to|over|"
                        r"under|by|a)\s+\d+(?:\.\d+)?\s*%|[<>≤≥]\s*\d+(?:\.\d+)?\s*%|\d+(?:\.\d+)?\s*%\s*(?:or (?:more|greater)|"
                        r"reduction|decrease|increase|drop|fall|rise|improvement in)|\b(?:risk|relative|absolute)\s+"
                        r"(?:risk\s+)?(?:reduction|increase|difference)s?\s+(?:of\s+)?\d+(?:\.\d+)?\s*%|\d+(?:\.\d+)?\s*%\s*"
                        r"(?:female|male|women|men|girls|boys|white|black|caucasian)\b|\b(?:almost|approximately|about|"
                        r"nearly|around|roughly|~)\s*\d+(?:\.\d+)?\s*%|\d+(?:\.\d+)?\s*%\s*to\s*\d+(?:\.\d+)?\s*%", re.I)  # fmt: skip
_PERCENT = re.compile(r"(?<![\d.])(?P<p>\d+(?:\.\d+)?)\s*%(?!\s*(?:CI|confidence))")
# a number that is no dose or time: between a percentage and the count pair it prints, none may stand
_NOT_DOSE_DIGIT = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?!\d|\.\d|\s*(?:mg|µg|mcg|g|ml|weeks?|months?|days?)\b)", re.I)
# a share of events, not of an arm's patients ("86% of all attacks", "2.1 per 100 catheter-days"), a figure over the
# arms pooled ("12% of all patients", "in both groups", "a total of 40 patients", "overall, 9%"), or a relative change
# ("a dose 50% higher")
_NOT_ARM_SHARE = re.compile(
    r"\d+(?:\.\d+)?\s*%?\s*(?:of\s+(?:all\s+|the\s+|treated\s+)*(?:attacks|headaches|episodes|events|catheters|cycles|"
    r"infusions|treated attacks)|per\s+(?:\d+\s+)?(?:attacks?|headaches?|episodes?|patient|person|catheter)[\w-]*|"
    r"(?:of\s+)?(?:(?:all|the)\s+)?(?:patients\s+)?(?:in|of|across)\s+(?:both|all|the two|the\s+\d+)\s+(?:groups|arms|"
    r"treatment groups|patients))\b|\b(?:a total of|overall,?|in total,?|altogether,?)\s+\d+(?:\.\d+)?"
    r"(?:\s*(?:/|of)\s*\d+)?(?:\s*[(\[]\s*\d+(?:\.\d+)?\s*%\s*[)\]]|\s*%)?|"
    r"\d+(?:\.\d+)?\s*%\s*(?:higher|lower|greater|smaller|more|less|above|below)\b",
    re.I,
)
# a count pair over things that are not an arm's patients: "two of the three study arms", "one of four strategies",
# "5 of 31 SPTs", "compound 48/80"
_NOT_PATIENTS = re.compile(r"\s*(?:(?!(?:in|on|with|of|the|for|among|to|at|after|and|or|who|were|was|had)\b)[a-z-]+\s+)"
                           r"{0,3}?(?:arms?|groups?|strateg(?:y|ies)|regimens?|studies|trials?|"
                           r"cent(?:re|er)s|sites|visits|doses|attacks|headaches|episodes|tests|[A-Z]{2,}s|periods|items|"
                           r"questions|nights|cycles|infusions|catheters|sessions|drugs|agents|treatments|therapies|"
                           r"terminations|reactions|events|reasons|measures|end ?points|outcomes|variables|parameters|"
                           r"criteria|domains|scales|comparisons)\b")  # fmt: skip
_APPROXIMATE = re.compile(
    r"\b(?:almost|approximately|about|nearly|around|roughly|some)\s+\d+(?:\.\d+)?\s*%|~\s*\d", re.I
)
_PERCENT_ENUM = re.compile(
    r"(?<![\d.])(?P<p>\d+(?:\.\d+)?)(?=\s*(?:,|and|%?\s*vs\.?|%?\s*-)\s*(?:\d+(?:\.\d+)?\s*(?:,|and)\s*)*\d+(?:\.\d+)?\s*%)"
)
_CI_PAREN = re.compile(
    r"\((?:[^()]*\b(?:CI|confidence)\b[^()]*)\)|\bCI\b[^;)]*|\b(?:difference|gain)\s+(?:of\s+)?\d+(?:\.\d+)?\s*%|"
    r"\bP\s*[<=>≤≥]\s*[\d.]+",
    re.I,
)
_TIME = re.compile(
    r"\b(?:(?:weeks?|wks?|months?|days?)\s+(?P<n1>\d+)|(?P<n2>\d+)(?:\s*(?:,|and|or|to|-)\s*\d+)*[\s-]*"
    r"(?P<u2>weeks?|wks?|months?|days?|mo|years?|hours?|h)\b|(?P<n3>one|two|three|four|six|eight|twelve)[\s-]+"
    r"(?P<u3>weeks?|months?|years?|hours?))",
    re.I,
)
_TIME_LIST = re.compile(
    r"(?P<first>\d+)\s*(?:,|and|or)\s*(?P<second>\d+)[\s-]*(?P<unit>weeks?|wks?|months?|days?)\b", re.I
)
_UNIT_WEEKS = {"w": 1.0, "m": 52 / 12, "d": 1 / 7, "y": 52.0, "h": 1 / 168}
_SMALL = {"one": 1, "two": 2, "three": 3, "four": 4, "six": 6, "eight": 8, "twelve": 12}

# Outcome classes, first match wins: the first rules' classes (healing, relapse, remission, eradication, symptom
# relief), and the kinds of outcome a review pools in any field (thrombotic events, bleeding, death, infection,
# response, adverse events), named after MeSH headings; the words of the abstract are kept beside the class.
_OUTCOMES = (
    ("remission", re.compile(r"\b(?:neither|no|without|free (?:of|from))\b[^.;]{0,60}\b(?:relapse|recurren)", re.I)),
    ("thrombosis", re.compile(r"\bthrombos[ie]s|\bthromb(?:i|us|otic|oembol\w*)\b|\bthromboembol|(?-i:\br?(?:DVT|VTE|CVT|PE)s?\b)|"
                              r"\bembol(?:i|ism|us)\b|\bocclusi", re.I)),
    ("relapse", re.compile(r"\brelapse|\brecurren", re.I)),
    ("remission", re.compile(r"\bremission|remained healed|\bmaintain", re.I)),
    ("healing", re.compile(r"\bheal(?!th)", re.I)),
    ("eradication", re.compile(r"\beradicat|\bcure", re.I)),
    ("symptom relief", re.compile(r"\breli(?:ef|eved)|\bresol|symptom[- ]free|free (?:from|of)|asymptomatic|pain[- ]free|"
                                  r"\bimprove|headache[- ](?:free|response)|\bheadache\b[^.;]{0,30}\bdisappeared|"
                                  r"decrease in pain", re.I)),
    ("bleeding", re.compile(r"\b(?:re-?)?bleed|\bha?emorrha|\bha?ematoma", re.I)),
    ("death", re.compile(r"\bdeaths?\b|\bdied\b|\bmortality\b|\bfatal", re.I)),
    ("infection", re.compile(r"\binfecti|\bsepsis\b|\bbacter(?:a)?emia", re.I)),
    ("response", re.compile(r"\bresponse|\bresponders?\b|\bsatisf(?:ied|action)\b|\bprevented\b|\bcompliance", re.I)),
    ("adverse events", re.compile(r"\badverse|\bside[- ]effects?|\btoxicit|\bheadaches?\b|\bdiarrh|\bnausea|"
                                  r"\bdizziness|\bsomnolence|\bhypoglyc(?:a)?emi", re.I)),
)  # fmt: skip
HARMS = ("bleeding", "death", "adverse events")  # outcome classes that are harms
OUTCOME_CLASSES = tuple(dict.fromkeys(name for name, _ in _OUTCOMES))


def normalise_text(text: str) -> str:
    """The text the rules read: number words as digits ("One hundred and two" → "102"), dummy placebos blanked.
    Data quote the original sentence, not this one."""

    def digits(m: re.Match[str]) -> str:
        value = parse_number(m.group(0))
        return m.group(0) if value is None or m.group(0).isdigit() else str(value)

    text = _WORD_NUMBER.sub(digits, text)
    text = _PERCENT_WORD.sub("%", text)  # "69 percent" is "69%"
    return _DUMMY.sub(lambda m: " " * len(m.group(0)), text)


def time_points(text: str) -> list[tuple[int, float]]:
    """(position, weeks) of each time point: "after 4 and 8 weeks" gives two, "wk 4", "12 months", "day 14"."""
    out: list[tuple[int, float]] = []
    for m in _TIME_LIST.finditer(text):
        unit = _UNIT_WEEKS[m.group("unit")[0].lower()]
        out += [(m.start("first"), round(int(m.group("first")) * unit, 1)),
                (m.start("second"), round(int(m.group("second")) * unit, 1))]  # fmt: skip
    for m in _TIME.finditer(text):
        if any(m.start() <= pos < m.end() for pos, _ in out):
            continue
        if m.group("n1"):
            value, unit = int(m.group("n1")), m.group(0)[0]
        elif m.group("n2"):
            value, unit = int(m.group("n2")), m.group("u2")[0]
        else:
            value, unit = _SMALL[m.group("n3").lower()], m.group("u3")[0]
        if re.search(r"\bage[ds]?\b[\s,:(]*(?:\w+\s+){0,2}$", text[max(0, m.start() - 25) : m.start()], re.I):
            continue  # "mean age, 37.6 years"
        if unit.lower() == "h" and not (_HOUR_BEFORE.search(text[: m.start()]) or _HOUR_AFTER.match(text[m.end() :])):
            continue  # "over 24 hours", "24-h pH": a measurement window, not when the outcome was assessed
        weeks = value * _UNIT_WEEKS[unit.lower()]
        out.append((m.start(), round(weeks, 3 if unit.lower() == "h" else 1)))
    return sorted(out)


_HOUR_BEFORE = re.compile(r"\b(?:at|within|after|by|until)\s+$", re.I)
_HOUR_AFTER = re.compile(r"\s*(?:post-?dos\w*|after (?:dosing|treatment|the dose|drug))", re.I)


def outcome_class(text: str) -> str:
    return next((name for name, rx in _OUTCOMES if rx.search(text)), "")


_FUNCTION = re.compile(r"(?:the|a|an|of|in|with|and|or|was|were|had|has|have|occurred|developed|observed|there|"
                       r"patients?|rates?|incidences?|frequency|number|at|by|for|to|on|no|any|total|both|all|"
                       r"\d.*)$", re.I)  # fmt: skip


def outcome_words(text: str, arm_rx: re.Pattern[str] | None = None) -> str:
    """The abstract's words for the outcome of a sentence: the words its outcome class matched, with up to two
    words before them that are not function words or arm names ("symptomatic CVC-associated thromboses", "major
    bleeding"); "" when no class matches."""
    rx = next((rx for _, rx in _OUTCOMES if rx.search(text)), None)
    if rx is None:
        return ""
    m = rx.search(text)
    assert m is not None
    end = m.end() + len(re.match(r"[\w-]*", text[m.end() :]).group(0))  # type: ignore[union-attr]
    tail = re.match(r"\s+(?:events?|episodes?|rates?|responses?)\b", text[end:])
    end += tail.end() if tail else 0
    masked = arm_rx.sub(lambda a: "\x00" * len(a.group(0)), text) if arm_rx else text
    start = m.start() - len(re.search(r"[\w-]*$", text[: m.start()]).group(0))  # type: ignore[union-attr]
    for _ in range(2):
        prev = re.search(r"([A-Za-z][\w-]*)\s+$", masked[:start])
        if not prev or _FUNCTION.fullmatch(prev.group(1)) or "\x00" in prev.group(0):
            break
        start = prev.start(1)
    return " ".join(text[start:end].split())


@dataclass(frozen=True)
class Number:
    start: int
    events: int | None  # a stated count
    total: int | None
    percent: float | None
    decimals: int
    mean: float | None = None  # a continuous result ("12.1 +/- 7.9")
    sd: float | None = None


_MEAN_SD = re.compile(
    r"(?<![\d.,])(?P<mean>[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*%?\s*(?:±|\+/-|\+/−|\+-)\s*"
    r"(?P<sd>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*%?"
    r"|(?<![\d.])(?P<mean2>[-−]?\d+(?:\.\d+)?)\s*\(\s*(?:SD|SEM?|s\.d\.)\s*[=:,]?\s*(?P<sd2>\d+(?:\.\d+)?)\s*\)",
    re.I,
)
# words before a "mean ± dispersion" that describe the patients or the follow-up, not a result; a duration after it
_NOT_RESULT_VALUE = re.compile(r"\b(?:aged?|ages|body mass index|BMI|duration|follow-?up|diabetes for|history of)\b"
                               r"[^;,()]*$", re.I)  # fmt: skip
_DURATION = re.compile(r"\s*(?:years?|yrs?|months?|weeks?|days?)\b", re.I)
_SD_WORDS = re.compile(r"\bSD\b|\bs\.d\.|(?i:standard deviation)")
_SE_WORDS = re.compile(r"\bSEM?\b|(?i:standard error)")


def continuous_values(text: str) -> list[Number]:
    """The "mean ± dispersion" values of a sentence, in order; the first value of "from A to B" (a baseline) is not
    a result."""
    out = []
    for m in _MEAN_SD.finditer(text):
        if re.search(r"\bfrom\s+(?:a\s+mean\s+of\s+)?$", text[: m.start()], re.I) or re.match(
            r"\s*(?:[^\s\d(),;]+\s*)?to\s+[-−]?\d", text[m.end() :]
        ):
            continue
        if _NOT_RESULT_VALUE.search(text[max(0, m.start() - 40) : m.start()]) or _DURATION.match(text[m.end() :]):
            continue  # "aged 55 ± 12 years", "a mean follow-up of 24.4 ± 10.4 months": who was treated and for how long
        if text[max(0, m.start() - 1) : m.start()] == "/" or text[m.end() : m.end() + 1] == "/":
            continue  # "127 ± 8/82 ± 6 mm Hg": a systolic/diastolic pair the sentence gives per arm as one value
        mean, sd = (
            (m.group("mean"), m.group("sd")) if m.group("mean") is not None else (m.group("mean2"), m.group("sd2"))
        )
        value = lambda v: float(v.replace("−", "-").replace(",", ""))  # noqa: E731
        out.append(Number(m.start(), None, None, None, 0, value(mean), value(sd)))
    return out


def dispersion(sentence: str, abstract: str) -> str:
    """What a "±" of this abstract is: "SD", "SE" (the sentence's own word first, then the abstract's), else ""."""
    for text in (sentence, abstract):
        sd, se = bool(_SD_WORDS.search(text)), bool(_SE_WORDS.search(text))
        if sd != se:
            return "SD" if sd else "SE"
    return ""


def numbers_in(text: str) -> list[Number]:
    """Count pairs and percentages in order; percentages inside a CI or P parenthesis and differences are skipped,
    and so are the values of "mean ± dispersion" (read by `continuous_values`)."""
    masked = _MEAN_SD.sub(lambda m: " " * len(m.group(0)), text)
    masked = _CI_PAREN.sub(lambda m: " " * len(m.group(0)), masked)
    masked = _THRESHOLD.sub(lambda m: " " * len(m.group(0)), masked)
    masked = _NOT_ARM_SHARE.sub(lambda m: " " * len(m.group(0)), masked)
    # an allocation parenthesis ("(n=408; 324 [79%] on fixed-dose …)") describes the arm, it states no result
    masked = re.sub(r"\(\s*n\s*=[^()]*\)", lambda m: " " * len(m.group(0)), masked, flags=re.I)
    out: list[Number] = []
    taken: list[tuple[int, int]] = []
    not_patients: set[int] = set()  # totals the sentence counts things other than patients over ("of 31 SPTs")
    for m in _PAIR.finditer(masked):
        e, t = int(m.group("e")), int(m.group("t"))
        chain = masked[max(0, m.start() - 1) : m.start()] == "/" or masked[m.end("t") : m.end("t") + 1] == "/"
        if (
            _NOT_PATIENTS.match(masked[m.end("t") :])
            or re.search(r"\bcompound\s+$", masked[: m.start()], re.I)
            or (e == 1 and re.search(r"\b(?:to|into|receive|with)\s+$", masked[: m.start()], re.I))
        ):  # "randomized into 1 of 2 distinct groups", "with 1 of 6 randomly allocated drugs"
            not_patients.add(int(m.group("t")))
            continue
        if int(m.group("t")) in not_patients:  # "Four of 31 SPTs (13%) … and 5 of 31 (16%) …"
            continue
        if 0 <= e <= t and t > 1 and not chain and not re.match(r"\s*(?:mg|days?|weeks?|months?|hours?|h\b)",
                                                                   masked[m.end("t") :]):  # fmt: skip
            p = m.group("p1") or m.group("p2")
            out.append(Number(m.start(), e, t, float(p) if p else None, 0))
            taken.append((m.start(), m.end()))
            # "69% (100/144)": the percentage before the pair is the same number
            before = re.search(r"(\d+(?:\.\d+)?)\s*%\s*\(\s*$", masked[: m.start()])
            if before:
                taken.append((before.start(), m.start()))
    for m in _COUNT_PERCENT.finditer(masked):  # "61 (98%) patients who received lansoprazole"
        if not any(a <= m.start() < b for a, b in taken):
            p = m.group("p")
            out.append(Number(m.start(), int(m.group("e")), None, float(p), len(p.partition(".")[2])))
            taken.append((m.start(), m.end()))
    approximate = bool(_APPROXIMATE.search(text))  # "Approximately 7% of A …, compared with 12% of B": both rounded
    for rx in () if approximate else (_PERCENT, _PERCENT_ENUM):
        for m in rx.finditer(masked):
            if any(a <= m.start() < b for a, b in taken) or re.match(r"\s*(?:mg|patients)", masked[m.end() :]):
                continue
            p = m.group("p")
            pair = next((n for n in out if n.total and n.start > m.end() and n.start - m.end() < 80), None)
            between = masked[m.end() : pair.start] if pair else ""
            # between them only words, or a dose or time ("of the patients given 20 mg of omeprazole (")
            if pair and pair.total and pair.events is not None and not re.search(_NOT_DOSE_DIGIT, between):
                if round(100 * pair.events / pair.total, len(p.partition(".")[2])) == float(p):
                    continue  # "4%, 7 of 174", "76% of the patients given 20 mg of omeprazole (233 of 308)": the pair's own
            out.append(Number(m.start(), None, None, float(p), len(p.partition(".")[2])))
            taken.append((m.start(), m.end()))
    for m in re.finditer(r"(?<![\d.])(?P<a>\d+)\s+(?:vs\.?|versus)\s+(?P<b>\d+)(?![\d.%]|\s*(?:%|mg|years?|months?|weeks?|"
                         r"days?|hours?))", masked):  # fmt: skip
        if not any(a <= m.start() < b for a, b in taken):  # "(7 vs 1, p=0.07)": two counts, one per arm
            out += [Number(m.start("a"), int(m.group("a")), None, None, 0),
                    Number(m.start("b"), int(m.group("b")), None, None, 0)]  # fmt: skip
    return sorted(out, key=lambda n: n.start)


def count_list(text: str) -> list[Number]:
    """A list of bare counts in a "respectively" sentence: "there were 0, 0, 2 and 1 major bleeds, respectively"."""
    m = re.search(
        r"\b(\d+)((?:\s*,\s*\d+)*),?\s+and\s+(\d+)\s+(?:[A-Za-z-]+\s+){0,4}?[A-Za-z-]+,?\s+respectively", text
    )
    if m is None or re.search(
        r"%|\d\s*(?:mg|years?|months?|weeks?|days?)\b|\b(?:mm|Hg|kg|g|ml|mL|mmol|L|bpm|points?|"
        r"units?|cm)\b",
        m.group(0),
    ):
        return []
    values = [m.group(1), *re.findall(r"\d+", m.group(2)), m.group(3)]
    positions = [m.start() + i for i in range(len(values))]
    return [Number(pos, int(v), None, None, 0) for pos, v in zip(positions, values, strict=True)]


def count_from_percent(percent: float, decimals: int, total: int) -> int | None:
    """The count whose share of `total` prints as `percent` at its precision (None when no integer does)."""
    events = round(percent * total / 100)
    return events if 0 <= events <= total and round(100 * events / total, decimals) == percent else None


# the analysis set: a result or an arm size over completers, evaluable or assessable patients
PER_PROTOCOL = re.compile(r"per[- ]protocol|protocol[- ]correct|\bcompleted\b|\bevaluable\b|\bassessable\b|"
                           r"\bunderwent\b|\badequate for\b", re.I)  # fmt: skip
