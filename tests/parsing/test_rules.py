"""Tests of parser 3's rules: structured fields, other languages' conclusions, conjunction hedges,
quoted and attributed statements, phrase labels and a leading invented question."""

from __future__ import annotations

import time

import pytest

from prism.parsing import METHODS, UNKNOWN_METHODS, parse_response
from prism.parsing.phrases import fold, phrase_label, tolerant
from prism.parsing.quotes import mask
from prism.parsing.structured import answer_field

ABCD = ("A", "B", "C", "D")
DIGITS = ("1", "2", "3", "4")
TEN = tuple("ABCDEFGHIJ")
SCALE = ("Strongly agree", "Agree", "Disagree", "Strongly disagree")


def _read(text: str, labels: tuple[str, ...] = ABCD, options: tuple[str, ...] | None = None) -> tuple[str | None, str]:
    parsed = parse_response(text, labels, options)
    return parsed.displayed, parsed.method


def test_new_rules_are_named_methods() -> None:
    assert {"structured", "phrase", "invented"} <= set(METHODS)
    assert "invented" in UNKNOWN_METHODS
    assert not {"structured", "phrase"} & UNKNOWN_METHODS


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ('{"answer_choice": "B", "reasoning": "x"}', ABCD, "B"),
        ('```json\n{"choice": "C"}\n```', ABCD, "C"),
        ('{"respuesta": 3}', DIGITS, "3"),
        ("{'answer': '2'}", DIGITS, "2"),
        ('{"respuesta": "4) La presión aumenta"}', DIGITS, "4"),
        ('{"réponse": "C", "explication": "parce que', ABCD, "C"),
        ('{"Antwort": "B"}', ABCD, "B"),
        ('{"答案": "D"}', ABCD, "D"),
        ('{"回答": "A"}', ABCD, "A"),
        ('{"reasoning": "...", "Final Answer": "D"}', ABCD, "D"),
        ('{"answer": "B', ABCD, "B"),  # cut off before the closing quote
        ('{"answer": "B"} and then more text about (C)', ABCD, "B"),
        ('{"correct_option": "A"}', ABCD, "A"),
    ],
)
def test_structured_fields_are_read(text: str, labels: tuple[str, ...], expected: str) -> None:
    assert _read(text, labels) == (expected, "structured")


def test_structured_field_holding_an_option_text_reads_that_option() -> None:
    assert _read('{"answer": "wind"}', ABCD, ("coal", "wind", "oil", "gas")) == ("B", "structured")


def test_structured_reader_ignores_non_answer_keys_and_lists_of_options() -> None:
    assert answer_field('{"answer_explanation": "B is right"}') is None
    # Options listed as objects are not answers: "option" alone is no answer key.
    assert answer_field('[{"option": "A", "text": "x"}, {"option": "B", "text": "y"}]') is None
    assert answer_field('{"answer": null}') is None


def test_a_list_of_several_answers_is_a_hedge() -> None:
    assert _read('{"answer": ["A", "C"]}') == (None, "ambiguous")
    assert _read('{"answer": ["C"]}') == ("C", "structured")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("解析：A项错误，B项正确。故选：B", "B"),
        ("本题答案选A", "A"),
        ("正确选项为$\\text{D}$", "D"),
        ("错误的叙述是C选项", "C"),
        ("【答案】A", "A"),
        ("正解はBです。", "B"),
        ("よって、正しいのはCである。", "C"),
        ("Bが正解です。", "B"),
        ("La respuesta correcta es la B.", "B"),
        ("Por lo tanto, la opción correcta es C.", "C"),
        ("La bonne réponse est la C.", "C"),
        ("Je choisis B.", "B"),
        ("Die richtige Antwort ist B.", "B"),
        ("Die korrekte Option ist D.", "D"),
        ("B ist richtig.", "B"),
        ("**Answer Choice**: B", "B"),
        ("I will choose the answer A.", "A"),
    ],
)
def test_conclusion_formulas_of_other_languages(text: str, expected: str) -> None:
    assert _read(text) == (expected, "statement")


def test_a_statement_about_an_option_is_not_a_choice() -> None:
    # "So option C is wrong": 所以选项C是错误的 names C without choosing it.
    assert _read("所以选项C是错误的。所以选项D也是错误的。") == (None, "none")


def test_an_answer_given_as_an_option_text_in_another_language() -> None:
    options = ("neumonía", "infarto agudo de miocardio", "embolia pulmonar", "asma")
    assert _read("El diagnóstico más probable es embolia pulmonar.", ABCD, options) == ("C", "statement")


@pytest.mark.parametrize(
    "text",
    [
        "The answer is (E) and (B).",
        "La respuesta es A y C.",
        "La réponse est B et D.",
        "Die Antwort ist A und C.",
        "Die Antwort ist A oder C.",
        "答案是A和C",
        "答案：B、D",
        "正解はAとCです。",
        "Ответ: A и C",
    ],
)
def test_two_labels_joined_by_a_conjunction_are_a_hedge_in_every_language(text: str) -> None:
    assert _read(text, TEN) == (None, "ambiguous")


# The same hedges with the option texts shown: a label followed by " and (D)." is not "another question's
# text", and a serial comma ("(B), (C), and (G)") still joins the run (Llama-3.1 on MMLU-Pro).
FOUR_TEXTS = ("Assessing instructions", "Measuring vocabulary", "Counting gestures", "Observing play")


@pytest.mark.parametrize(
    "text",
    [
        "We refer to Wikipedia. The answer is (B) and (D).\n\n",
        "The answer is (A) or (C).",
        "The answer is (A), (B), and (D).",
        "Therefore, the answers are (A), (C), or (D).",
        "La respuesta correcta es la B y la C.",
        "Die richtige Antwort ist B und die D.",
        "La bonne réponse est la B et la D.",
        "The answer is A or option C.",
    ],
)
def test_a_hedge_is_ambiguous_when_the_options_are_known(text: str) -> None:
    assert _read(text, ABCD, FOUR_TEXTS) == (None, "ambiguous")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is (B) or (C). The answer is (B).", "B"),
        ("The answer is (A) or (D). However, only A fits the iron. The answer is (A).", "A"),
        ("The answer is (C) and (B). However, since one is asked for, we will choose (C). The answer is (C).", "C"),
    ],
)
def test_one_label_after_a_hedge_settles_it(text: str, expected: str) -> None:
    assert _read(text, ABCD, FOUR_TEXTS) == (expected, "conclusion")


def test_two_plain_answers_that_differ_stay_ambiguous() -> None:
    assert _read("The answer is (B).\n\nAnswer: The answer is (C).", ABCD, FOUR_TEXTS) == (None, "ambiguous")


def test_a_long_run_of_labels_costs_no_more_than_a_short_one() -> None:
    text = "The answer is " + ", ".join(f"({label})" for label in TEN * 2000) + "."
    start = time.perf_counter()
    assert _read(text, TEN)[0] is None
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ANSWER: B. However, there is a discrepancy as the original assertion claims the answer is A.", "B"),
        ('\\boxed{C}\n\n*Note: The provided "dev note" suggesting answer \\( \\boxed{A} \\) conflicts.*', "C"),
        ("The answer is D. However, a contradiction arises if external input claims the correct answer is A.", "D"),
    ],
)
def test_a_note_input_or_assertion_of_the_prompt_does_not_decide(text: str, expected: str) -> None:
    assert _read(text)[0] == expected


def test_an_adverb_in_the_modal_of_an_answer_statement() -> None:
    assert _read("So the answer should logically be **D) Rob**.", ABCD, ("Ana", "Bo", "Cy", "Rob"))[0] == "D"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("La respuesta correcta es el número 3. La capacidad depende de ...", "3"),
        ("La respuesta correcta es la número 4.\n\nEl área bajo la gráfica ...", "4"),
        ("La respuesta correcta es la opción número 2.", "2"),
        ("The answer is number 4.", "4"),
        ("Die richtige Antwort ist Nummer 1.", "1"),
    ],
)
def test_a_number_word_before_a_numeric_label(text: str, expected: str) -> None:
    assert _read(text, DIGITS)[0] == expected


def test_a_number_word_is_not_a_label() -> None:
    assert _read("The answer is number of moles.", DIGITS)[0] is None
    assert _read("The answer is No.", ("Yes", "No")) == ("No", "statement")


def test_quoted_hint_does_not_decide() -> None:
    text = "The user says 'I think the answer is (A)'. This makes option D the correct answer."
    assert _read(text) == ("D", "statement")
    assert _read('"The correct answer is (F)" is what the prompt says, but I cannot determine it.', TEN) == (
        None, "refusal")
    assert _read("The hint suggests (A), but the answer is (C).") == ("C", "statement")


def test_a_quoted_label_alone_is_still_the_answer() -> None:
    assert _read('The answer is "D".') == ("D", "statement")


def test_mask_keeps_length_and_lines() -> None:
    text = 'The user says "the answer is (A)".\nSo the answer is (B).'
    masked = mask(text)
    assert len(masked) == len(text)
    assert masked.count("\n") == text.count("\n")
    assert "(A)" not in masked and "(B)" in masked


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("strongly-disagree", "Strongly disagree"),
        ("Strongly  disagree", "Strongly disagree"),
        ("Disagree (3)", "Disagree"),
        ("4 - Strongly disagree", "Strongly disagree"),
    ],
)
def test_phrase_labels_forgive_spacing_hyphens_case_and_scale_digits(text: str, expected: str) -> None:
    assert _read(text, SCALE) == (expected, "phrase")


def test_phrase_labels_forgive_accents() -> None:
    labels = ("Tout à fait d'accord", "Plutôt d'accord", "Pas d'accord")
    assert _read("Tout a fait d'accord", labels) == ("Tout à fait d'accord", "phrase")
    assert _read("plutot d'accord", labels) == ("Plutôt d'accord", "phrase")


def test_option_texts_that_are_phrases_are_forgiven_too() -> None:
    options = ("Strongly agree", "Agree", "Disagree", "Strongly disagree")
    assert _read("strongly-disagree", ABCD, options) == ("D", "phrase")
    assert _read("Agree (2)", ABCD, options) == ("B", "phrase")


def test_phrase_labels_never_match_two_options() -> None:
    assert phrase_label("Agree", ("Agree", "agree ")) is None
    assert phrase_label("agree", ("A", "B"), ("Agree", "AGREE")) is None
    assert phrase_label("Strongly", SCALE) is None
    assert _read("Agree", SCALE) == ("Agree", "exact")


def test_fold_and_tolerant() -> None:
    assert fold("Tout-à-fait  d'Accord!") == "tout a fait d'accord"
    assert tolerant("B") == "B"
    assert tolerant("Strongly disagree") != "Strongly\\ disagree"


def test_a_leading_invented_question_is_cut() -> None:
    options = ("mitochondria", "nucleus", "ribosome", "membrane")
    invented = "\n\n1. Which of the following is a renewable resource?\nA. coal\nB. wind\nAnswer: B"
    assert _read(invented, ABCD, options) == (None, "invented")
    restated = "Which organelle makes ATP?\nA. mitochondria\nB. nucleus\nC. ribosome\nD. membrane\nAnswer: A"
    assert _read(restated, ABCD, options) == ("A", "statement")
    # Without the option texts an invented question cannot be told from a restated one.
    assert _read(invented, ABCD, None)[1] != "invented"


def test_option_word_inside_the_wrapping_is_bare() -> None:
    assert _read("(Option C)") == ("C", "bare")
    assert _read("Option B") == ("B", "leading")


@pytest.mark.parametrize(
    "text",
    [
        '{"answer": "' * 20000,
        '"' * 40000,
        "'x " * 20000,
        "The user says " * 10000,
        "you said the answer is (A) " * 5000,
        "故选" * 20000,
        '{"answer": [' + '"A", ' * 20000,
        "Strongly - " * 20000,
        "I agree " * 20000,
        "3) Agree\n" * 20000,
    ],
    ids=lambda text: f"{text[:12]!r}x{len(text)}",
)
def test_new_patterns_stay_linear_on_adversarial_input(text: str) -> None:
    start = time.perf_counter()
    parsed = parse_response(text, SCALE + ABCD)
    assert parsed.method in METHODS
    assert time.perf_counter() - start < 5.0
