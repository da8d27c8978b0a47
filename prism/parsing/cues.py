r"""The closed lists of words that introduce an answer or decline to give one. Label-independent.

An answer *cue* is a phrase after which the label is read ("the answer is", "Final answer:",
``\boxed{``, "### Answer" on its own line, "答案是", "Die Antwort ist", ...). A *refusal* is a reply
that declines to choose ("I cannot determine", "none of the options is correct").
"""

from __future__ import annotations

import re

from prism.parsing.labels import NO_ALNUM_AFTER, NO_ALNUM_BEFORE

_END = NO_ALNUM_AFTER
# Phrases after which the label is read, English first. Each ends where the gap before the label starts.
_CUES = (
    # "the answer is", "Final answer:", "answer would be", "Answer - B", "**Answer:** B".
    # Not "the incorrect answer is B". "The answer to your question is C", "for your exam".
    r"(?<!incorrect )(?<!wrong )answer(?:\s+(?:to|for)\s+(?:your|the|this)\s+(?:question|exam)(?:\s+above)?)?"
    # An adverb may stand in the modal: "The answer should logically be **D) Rob**".
    + r"[*_\s]*(?:(?:is|(?:would|will|should)\s+(?:[a-z]+ly\s+)?be)" + _END + r"|:|[-–—=](?=\s))",
    r"correct\s+(?:option|choice|letter)[*_\s]*(?:is|would\s+be)" + _END,
    # Weaker forms, read only with a wrapped label or an option word after them: "the closest is (G)",
    # "is closest to (A)", "which corresponds to option (A)", "which is option D", "or answer (F)".
    r"(?:is|are|be|answer)[^\S\n]*:?[^\S\n]*(?=[*_]{0,3}[(\[]|(?:option|choice)" + _END + ")",
    # "... is:" and the label on the next line.
    r"(?:is|are)[^\S\n]*:[^\S\n]*(?=\n)",
    r"closest(?:\s+(?:option|answer|choice|match))?\s+(?:is|to)" + _END,
    r"corresponds\s+to" + _END,
    r"I(?:\s+would|'d|\s+will|'ll)?\s+(?:choose|select|pick|go\s+with)(?:\s+the\s+(?:answer|option|choice))?" + _END,
    # "Label: 2) Disagree" (prompts that ask for "the label").
    r"(?<![\w-])label[*_]*:",
    # "**Answer Choice**: B", "Selected option: C", "Correct choice - D".
    r"(?:answer\s+(?:choice|letter|option)|(?:selected|chosen|correct)\s+(?:option|choice|answer))[*_\s]*(?::|[-–—=](?=\s))",
    # "The most likely diagnosis is <option text>", and its Spanish, French and German forms.
    r"most\s+likely\s+(?:diagnosis|cause|answer|explanation|option)\s+is" + _END,
    r"m[aá]s\s+probable\s+es|(?:le\s+)?plus\s+probable\s+est|am\s+wahrscheinlichsten\s+ist"
    + r"|wahrscheinlichste\s+\w{1,20}\s+ist" + _END,
    # LaTeX: \boxed{B}, \boxed{\text{B}}, with or without $...$ around.
    r"\\boxed\s*\{(?:\\text(?:bf)?\s*\{)?",
    # A heading or bold line that says only "Answer" ("### Answer", "**Final Answer**"), then the label
    # on a following line.
    r"(?m:^)[^\S\n]*(?:#{1,6}[^\S\n]*|[*_]{1,3})(?:final\s+|correct\s+)?answer[*_:]*[^\S\n]*(?=\n)",
    # Japanese 答え / 正解 / 解答, Chinese 答案 (正确答案是 B, 答案：B, 正解はBです).
    r"(?:答え|正解|解答|答案)(?:は|应该是|应是|应为|是|为|為|:)?[】\]]?",
    # Chinese exam conclusions: 故选B, 所以选C, 本题答案选A, 应选D; 正确选项为D; 错误的叙述是C选项.
    # Not "所以选项C是错误的" ("so option C is wrong"): a statement about an option, not a choice.
    r"(?:故|所以|因此|因而|综上|综上所述|答案|应|本题)[^\n。,;]{0,4}?选(?:择)?(?!项)(?:为|是)?:?",
    r"(?:正确|错误|不正确|不合理|合理|符合题意|不符合题意|恰当|不恰当)的?(?:叙述|说法|描述|一项|选项|答案)?(?:应该|应)?(?:是|为):?",
    # "选项为D", "对应选项是D", "所以选项是:D": the option is D.
    r"(?:选项|選択肢)(?:应该|应)?(?:为|是|は):?",
    # Japanese: 正しいのはB, 最も適切な選択肢はC, 正しいものはA.
    r"(?:正しい|適切な|最も適切な|誤っている|誤った)(?:もの|選択肢|の)(?:は|:)",
    r"(?:richtige\s+|korrekte\s+)?antwort(?:\s+(?:ist|lautet|wäre)" + _END + r"|\s*:)",
    r"(?:richtige|korrekte)\s+(?:Option|Wahl|Lösung|Auswahl)\s+(?:ist|lautet|wäre)" + _END,
    r"(?:bonne\s+)?réponse(?:\s+(?:correcte|juste|finale))?(?:\s+(?:est|serait)" + _END + r"|\s*:)",
    r"(?:option|proposition)\s+(?:correcte|juste)\s+est" + _END,
    r"respuesta(?:\s+(?:correcta|final))?(?:\s+(?:es|sería)" + _END + r"|\s*:)",
    r"(?:opción|alternativa)\s+(?:correcta|elegida)\s+es" + _END,
    r"(?:elijo|escojo|selecciono|je\s+choisis|ich\s+wähle)" + _END,
    # Russian: "Ответ: B", "Правильный ответ — C".
    r"(?:правильный\s+)?ответ(?:\s*:|\s+[-–—]\s|\s+(?:это|будет)" + _END + ")",
)
# The gap between a cue and its label: white space, colons and markdown, and an optional
# "option"/"choice"/"letter" word. Brackets and quotes around the label are left to the label
# pattern, so a label that itself contains one ("[1]") can still match.
_GAP = (
    r"[\s*_:]*(?:(?:\$|\\\(|\\\[|\\text(?:bf)?\{|\})[\s*_:]*){0,4}"  # LaTeX around it: $A$, \( B \), \text{A}
    # An article before the label or its option word: "es la B", "est la C", "ist die B".
    + r"(?:(?:la|el|le|l['’]|die|der|das)\s+(?=\S{1,12}(?:\W|$)))?"
    # "es el número 3", "la opción número 2", "is number 4", "ist Nummer 1": a number word before a label.
    + r"(?:(?:option|choice|letter|opción|alternativa|l['’]option|Antwort|選択肢|选项|вариант)" + _END + r"[\s:#*_]*)?"
    + r"(?:(?:número|numero|numéro|number|Nummer)" + _END + r"[\s:#*_]*)?"
)
CUE = re.compile(NO_ALNUM_BEFORE + "(?:" + "|".join(_CUES) + ")" + _GAP, re.IGNORECASE)

# "B or C", "A and B", "B, C", "(D, F, I)", "B (or D": a hedge between labels is not an answer.
# The conjunctions of every language the cues read: "A y C", "B et D", "A und C", "A和C", "B、C", "AかB";
# a serial comma may stand before the word ("(B), (C), and (G)", "B, or D"), and an article or option word
# after it ("la B y la C", "B und die D", "A or option C").
HEDGE = re.compile(
    r"[)\]}'\"’”*_」』】]*(?:(?:\s*,)?\s+(?:or|and|y|o|u|e|et|ou|und|oder|и|или)\s+"
    r"(?:(?:la|el|le|die|der|das|the|option|choice|opción)\s+)?|\s*[,/&、和与或及]\s*|\s+\(or\s+"
    r"|\s*(?:以及|或者|还是|および|及び|または|か|と)\s*)",
    re.IGNORECASE,
)
# "is D. <D's own text>": read only when the option's own text follows the label.
# "... as 3) Agree" ("I would rate my opinion as 3) Agree") reads the same way.
IS_CUE = re.compile(NO_ALNUM_BEFORE + r"(?:is|are|as)[^\S\n]*:?[^\S\n]*", re.IGNORECASE)
# Words that mark an answer statement as the final word after earlier answers that differ.
# Conclusion words of the other languages count too: 故选, 综上, よって, "por lo tanto", "donc", "daher".
FINAL = re.compile(
    r"final|\\boxed|actually|correction|corrected|revised|revision|故|综上|最终|よって|したがって|結論"
    r"|en\s+conclusi[oó]n|por\s+lo\s+tanto|donc|daher|somit|zusammenfassend",
    re.IGNORECASE,
)

_NONE_CORRECT = (
    r"none\s+of\s+the\s+(?:given\s+|provided\s+|listed\s+)?(?:options|choices|answers|above)"
    r"(?:\s+\w+){0,2}?\s+(?:is|are|seems?|appears?)\s+(?:to\s+be\s+)?(?:correct|right|accurate|valid)"
)
# Replies that decline to choose. Read only when no rule found an answer, and never when the reply
# contains a displayed option's own text (an option "None of the above" or a survey's "Refused").
REFUSAL = re.compile(
    NO_ALNUM_BEFORE
    + r"(?:I(?:'m|\s+am)\s+(?:sorry|unable|not\s+able)"
    + r"|I\s+(?:cannot|can't|can\s+not|could\s+not|couldn't)\s+(?:answer|determine|provide|choose|select"
    + r"|help|assist|decide|tell|pick)"
    + r"|as\s+an\s+AI|I(?:'m|\s+am)\s+(?:just\s+)?an?\s+(?:AI|artificial\s+intelligence)"
    + r"|(?:don't|do\s+not)\s+have\s+(?:any\s+)?(?:personal\s+)?(?:opinions|beliefs|views)"
    + r"|there\s+is\s+no\s+(?:correct|right|valid)\s+(?:answer|option|choice)"
    + r"|cannot\s+be\s+determined|(?:not\s+enough|insufficient)\s+information"
    + r"|I\s+do(?:\s+not|n't)\s+know|" + _NONE_CORRECT + ")" + _END,
    re.IGNORECASE,
)
