"""Our VRTY equals ``vrty.score()`` 1.0.1 exactly, dimension by dimension.

``vrty`` installs only on Python 3.11 (it is in the dev extra with a
``python_version`` marker); there the comparison runs on 1,200+ generated
pairs and requires ``==`` on every float. Elsewhere the golden values in
``test_vrty.py`` pin the same numbers.
"""

from __future__ import annotations

import random
import sys

import pytest

from llm_connect.scoring.vrty import IDF_SHA256, MAX_TOKENS, VrtyScorer, analyse
from llm_connect.scoring.vrty._idf import idf_table
from tests.fixtures.skips import skip_or_fail


@pytest.fixture(autouse=True)
def _python_3_11() -> None:
    if sys.version_info[:2] != (3, 11):
        skip_or_fail(
            "LLM_CONNECT_REQUIRE_VRTY",
            "vrty 1.0.1 installs only on Python 3.11 (dev extra, python_version marker), "
            f"this is Python {sys.version_info.major}.{sys.version_info.minor}",
            tests="the comparison with vrty 1.0.1",
        )


DIMENSIONS = ("composite", "relevance", "coherence", "completeness", "conciseness")

ODD_WORDS = [
    "café",
    "naïve",
    "Ångström",
    "résumé",
    "façade",
    "Straße",
    "ﬁnance",
    "ＡＢＣ",
    "ℌilbert",
    "e\u0301lan",
    "東京",
    "日本の首都です",
    "Москва",
    "Ελλάδα",
    "مرحبا",
    "😀",
    "½",
    "x²",
    "İstanbul",
    "kubernetes",
    "async",
    "API",
    "endpoint",
    "LLM",
    "gpt",
    "zzqx",
    "multi-head",
    "don't",
    "U.S.A",
    "3.14",
    "2024",
    "1,000",
    "42nd",
    "v1.0.1",
    "snake_case",
    "CamelCase",
    "e-mail",
    "#tag",
    "@user",
]
TERMINATORS = [".", "!", "?", "...", "?!", ".)", '."', "", ";", ":"]
GAPS = [" ", "  ", "\n", "\n\n", "\t", " \n ", "\u00a0", "\u2003", "\u3000", "\u1680", "\u2028", "\x1c", ""]


class PairMaker:
    """Seeded generator of (prompt, response) pairs covering VRTY's edge cases."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        table = idf_table()
        self.vocab = sorted(table.idf)
        self.common = [w for w in self.vocab if table.idf[w] < 4.0]
        self.stop = sorted(table.stopwords)

    def word(self) -> str:
        r = self.rng.random()
        if r < 0.30:
            return self.rng.choice(self.stop)
        if r < 0.65:
            return self.rng.choice(self.common)
        if r < 0.85:
            return self.rng.choice(self.vocab)
        if r < 0.93:
            return "".join(
                self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(self.rng.randint(2, 9))
            )
        return self.rng.choice(ODD_WORDS)

    def cased(self, word: str) -> str:
        r = self.rng.random()
        return word.upper() if r < 0.05 else word.capitalize() if r < 0.2 else word

    def sentence(self, n_words: int, *, pool: list[str] | None = None) -> str:
        words = [
            self.cased(self.rng.choice(pool) if pool and self.rng.random() < 0.5 else self.word())
            for _ in range(n_words)
        ]
        return " ".join(words) + self.rng.choice(TERMINATORS)

    def text(self, n_tokens: int, *, pool: list[str] | None = None) -> str:
        parts: list[str] = []
        left = n_tokens
        while left > 0:
            n = min(left, self.rng.choice([1, 2, 3, 5, 8, 12, 20, 35, 60]))
            parts.append(self.sentence(n, pool=pool))
            parts.append(self.rng.choice(GAPS))
            left -= n
        return "".join(parts)

    def pair(self, kind: str) -> tuple[str, str]:
        rng = self.rng
        prompt = self.text(rng.randint(3, 40))
        pool = prompt.split()
        if kind == "short":
            return prompt, self.text(rng.randint(1, 30), pool=pool)
        if kind == "medium":
            return prompt, self.text(rng.randint(80, 600), pool=pool)
        if kind == "long":  # past the cap, sentences straddling it
            return prompt, self.text(rng.randint(MAX_TOKENS - 40, 3 * MAX_TOKENS), pool=pool)
        if kind == "one_giant_sentence":
            words = [self.word() for _ in range(rng.randint(MAX_TOKENS - 5, MAX_TOKENS + 300))]
            return prompt, " ".join(words) + ". Short tail sentence."
        if kind == "exact_cap":
            first = " ".join(self.word() for _ in range(rng.randint(1, 100)))
            return prompt, first + ". " + self.text(MAX_TOKENS, pool=pool)
        if kind == "long_prompt":
            return self.text(rng.randint(MAX_TOKENS - 100, 2 * MAX_TOKENS)), self.text(rng.randint(5, 300))
        if kind == "unicode":
            words = [rng.choice(ODD_WORDS) for _ in range(rng.randint(1, 30))]
            return " ".join(rng.choice(ODD_WORDS) for _ in range(5)) + "?", " ".join(words) + "."
        if kind == "empty_prompt":
            return rng.choice(["", " ", "\n\t", "...", "?!", "東京", "123"]), self.text(rng.randint(1, 80))
        if kind == "stopword_prompt":
            return " ".join(rng.choice(self.stop) for _ in range(rng.randint(1, 12))) + "?", self.text(40)
        if kind == "empty_response":
            return prompt, rng.choice(
                [
                    "",
                    " ",
                    "\n\n\t",
                    "...!!!???",
                    "— – …",
                    "東京は日本",
                    "42 3.14 7",
                    "😀😀",
                    "\u00a0\u3000",
                    "(,;:)",
                ]
            )
        if kind == "repetition":
            unit = rng.choice([self.word(), self.sentence(rng.randint(1, 6)), rng.choice(pool)])
            return prompt, (unit + rng.choice([" ", ". ", "! ", "\n"])) * rng.randint(2, 400)
        if kind == "echo":
            return prompt, prompt if rng.random() < 0.5 else (prompt + " ") * rng.randint(2, 5)
        if kind == "terminators":
            pieces = [
                self.sentence(rng.randint(1, 6)) + rng.choice(["", " ", "\n", "\t\t", "\u2029"])
                for _ in range(rng.randint(2, 25))
            ]
            return prompt, "".join(pieces)
        if kind == "numbers":
            nums = [
                str(rng.randint(0, 10**6)) + rng.choice(["", ".", ".5", "%", "th", "k"])
                for _ in range(rng.randint(1, 30))
            ]
            return prompt, " ".join(nums + [self.word() for _ in range(rng.randint(0, 5))])
        raise AssertionError(kind)


KINDS = [
    ("short", 260),
    ("medium", 120),
    ("long", 50),
    ("one_giant_sentence", 12),
    ("exact_cap", 12),
    ("long_prompt", 30),
    ("unicode", 120),
    ("empty_prompt", 80),
    ("stopword_prompt", 40),
    ("empty_response", 60),
    ("repetition", 120),
    ("echo", 50),
    ("terminators", 150),
    ("numbers", 60),
]


def _pairs() -> list[tuple[str, str, str]]:
    maker = PairMaker(20261121)
    return [(kind, *maker.pair(kind)) for kind, count in KINDS for _ in range(count)]


def test_every_dimension_equals_vrty_exactly_on_generated_pairs() -> None:
    import vrty

    pairs = _pairs()
    assert len(pairs) >= 1000
    mismatches = []
    for kind, prompt, response in pairs:
        ours = analyse(prompt, response)
        theirs = vrty.score(prompt, response)
        for dim in DIMENSIONS:
            if getattr(ours, dim) != getattr(theirs, dim):
                mismatches.append(
                    (kind, dim, getattr(ours, dim), getattr(theirs, dim), prompt[:60], response[:60])
                )
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"


def test_score_pair_equals_vrty_for_both_sides() -> None:
    import vrty

    scorer = VrtyScorer()
    pairs = _pairs()
    for (_, prompt, baseline), (_, _, candidate) in zip(pairs[::2], pairs[1::2], strict=True):
        base, cand = scorer.score_pair(baseline, candidate, prompt=prompt)
        assert base.value == vrty.score(prompt, baseline).composite
        assert cand.value == vrty.score(prompt, candidate).composite
        for side, text in ((base, baseline), (cand, candidate)):
            theirs = vrty.score(prompt, text).to_dict()
            assert {d: side.details[d] for d in DIMENSIONS} == {d: theirs[d] for d in DIMENSIONS}


def test_generated_pairs_cover_the_edge_cases() -> None:
    results = [(kind, analyse(p, r)) for kind, p, r in _pairs()]
    assert any(r.response_tokens == MAX_TOKENS for _, r in results), "some response must hit the cap"
    assert any(k == "empty_response" and r.composite == 0.0 for k, r in results)
    assert any(k == "empty_prompt" and r.relevance == 0.0 and r.conciseness > 0 for k, r in results)
    assert any(r.sentences > 50 for _, r in results)
    assert any(r.relevance == 1.0 for _, r in results)  # the clamp on identical vectors


def test_idf_table_and_version_match_the_installed_vrty() -> None:
    import vrty
    from vrty.data_loader import load_idf

    snapshot = load_idf()
    table = idf_table()
    assert vrty.__version__ == "1.0.1"
    assert snapshot.sha256 == table.sha256 == IDF_SHA256
    assert snapshot.idf_oov == table.oov
    assert dict(snapshot.idf) == table.idf
    assert snapshot.stopwords == table.stopwords
