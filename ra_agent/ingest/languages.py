"""A record's languages as PubMed writes them (MARC / ISO 639-2/B codes: "eng", "ger", "fre"), read from the codes
and names exports give: PubMed's own codes, the ISO 639-2/T and ISO 639-1 codes ("deu", "de", "en-GB") and English
names ("English", "German")."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ra_agent.models import ENGLISH, UNDETERMINED_LANGUAGE

# PubMed's code (NLM's language table), then the other codes and the English names that mean it. Names shared by
# two languages ("Serbo-Croatian", "Mandarin") are left out: such a value is not read.
_LANGUAGES: tuple[tuple[str, ...], ...] = (
    ("afr", "af", "afrikaans"),
    ("alb", "sq", "sqi", "albanian"),
    ("amh", "am", "amharic"),
    ("ara", "ar", "arabic"),
    ("arm", "hy", "hye", "armenian"),
    ("aze", "az", "azerbaijani"),
    ("ben", "bn", "bengali"),
    ("bos", "bs", "bosnian"),
    ("bul", "bg", "bulgarian"),
    ("cat", "ca", "catalan"),
    ("chi", "zh", "zho", "chinese"),
    ("cze", "cs", "ces", "czech"),
    ("dan", "da", "danish"),
    ("dut", "nl", "nld", "dutch"),
    (ENGLISH, "en", "english"),
    ("epo", "eo", "esperanto"),
    ("est", "et", "estonian"),
    ("fin", "fi", "finnish"),
    ("fre", "fr", "fra", "french"),
    ("geo", "ka", "kat", "georgian"),
    ("ger", "de", "deu", "german"),
    ("gla", "gd", "scottish gaelic"),
    ("gre", "el", "ell", "greek", "modern greek"),
    ("heb", "he", "hebrew"),
    ("hin", "hi", "hindi"),
    ("hrv", "hr", "scr", "croatian"),
    ("hun", "hu", "hungarian"),
    ("ice", "is", "isl", "icelandic"),
    ("ind", "id", "indonesian"),
    ("ita", "it", "italian"),
    ("jpn", "ja", "japanese"),
    ("kin", "rw", "kinyarwanda"),
    ("kor", "ko", "korean"),
    ("lat", "la", "latin"),
    ("lav", "lv", "latvian"),
    ("lit", "lt", "lithuanian"),
    ("mac", "mk", "mkd", "macedonian"),
    ("mal", "ml", "malayalam"),
    ("mao", "mi", "mri", "maori"),
    ("may", "ms", "msa", "malay"),
    ("mul", "multiple languages"),
    ("nor", "no", "nb", "nn", "nob", "nno", "norwegian"),
    ("per", "fa", "fas", "persian", "farsi"),
    ("pol", "pl", "polish"),
    ("por", "pt", "portuguese"),
    ("pus", "ps", "pushto", "pashto"),
    ("rum", "ro", "ron", "romanian", "rumanian"),
    ("rus", "ru", "russian"),
    ("san", "sa", "sanskrit"),
    ("slo", "sk", "slk", "slovak"),
    ("slv", "sl", "slovenian", "slovene"),
    ("spa", "es", "spanish"),
    ("srp", "sr", "scc", "serbian"),
    ("swe", "sv", "swedish"),
    ("tha", "th", "thai"),
    ("tur", "tr", "turkish"),
    ("ukr", "uk", "ukrainian"),
    (UNDETERMINED_LANGUAGE, "undetermined"),
    ("urd", "ur", "urdu"),
    ("vie", "vi", "vietnamese"),
    ("wel", "cy", "cym", "welsh"),
)
PUBMED_CODE: dict[str, str] = {spelling: row[0] for row in _LANGUAGES for spelling in row}
_SEPARATORS = re.compile(r"[;,|/]+|\s+and\s+", re.I)
_REGION = re.compile(r"^([a-z]{2,3})[-_][a-z0-9]{2,8}$")  # "en-GB", "pt_BR"


def _code(word: str) -> str | None:
    word = word.strip(" .()[]\"'").lower()
    if match := _REGION.match(word):
        word = match.group(1)
    return PUBMED_CODE.get(word)


def language_codes(values: Iterable[str]) -> list[str]:
    """The PubMed codes the values name, in order, each once: "English; French" -> ["eng", "fre"], "eng fre" ->
    ["eng", "fre"], "de" -> ["ger"]. A value that names no language ra knows ("Klingon", "Serbo-Croatian") is
    left out, so a record whose only value is such is of unknown language (empty)."""
    codes: list[str] = []
    for value in values:
        for part in _SEPARATORS.split(value or ""):
            if not part.strip():
                continue
            if code := _code(" ".join(part.split())):
                codes.append(code)
            elif all(words := [_code(w) for w in part.split()]):
                codes += [w for w in words if w]
    return list(dict.fromkeys(codes))


__all__ = ["PUBMED_CODE", "language_codes"]
