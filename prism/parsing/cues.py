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
    + r"[*_\s]*(?:(?:is|would\s+be|will\s+be|should\s+be)" + _END + r"|:|[-–—=](?=\s))",
    r"correct\s+(?:option|choice|letter)[*_\s]*(?:is|would\s+be)" + _END,
    # Weaker forms, read only with a wrapped label or an option word after them: "the closest is (G)",
    # "is closest to (A)", "which corresponds to option (A)", "which is option D", "or answer (F)".
    r"(?:is|are|be|answer)[^\S\n]*:?[^\S\n]*(?=[(\[]|(?:option|choice)" + _END + ")",
    # "... is:" and the label on the next line.
    r"(?:is|are)[^\S\n]*:[^\S\n]*(?=\n)",
    r"closest(?:\s+(?:option|answer|choice|match))?\s+(?:is|to)" + _END,
    r"corresponds\s+to" + _END,
    r"I(?:\s+would|'d|\s+will|'ll)?\s+(?:choose|select|pick|go\s+with)" + _END,
    # LaTeX: \boxed{B}, \boxed{\text{B}}, with or without $...$ around.
    r"\\boxed\s*\{(?:\\text(?:bf)?\s*\{)?",
    # A heading or bold line that says only "Answer" ("### Answer", "**Final Answer**"), then the label
    # on a following line.
    r"(?m:^)[^\S\n]*(?:#{1,6}[^\S\n]*|[*_]{1,3})(?:final\s+|correct\s+)?answer[*_:]*[^\S\n]*(?=\n)",
    # Japanese 答え / 正解 / 解答, Chinese 答案 (正确答案是 B, 答案：B, 正解はBです).
    r"(?:答え|正解|解答|答案)(?:は|应该是|应是|应为|是|为|為|:)?[】\]]?",
    r"(?:richtige\s+)?antwort(?:\s+(?:ist|lautet)" + _END + r"|\s*:)",
    r"(?:bonne\s+)?réponse(?:\s+(?:correcte|juste))?(?:\s+est" + _END + r"|\s*:)",
    r"respuesta(?:\s+correcta)?(?:\s+es" + _END + r"|\s*:)",
    # Russian: "Ответ: B", "Правильный ответ — C".
    r"(?:правильный\s+)?ответ(?:\s*:|\s+[-–—]\s|\s+(?:это|будет)" + _END + ")",
)
# The gap between a cue and its label: white space, colons and markdown, and an optional
# "option"/"choice"/"letter" word. Brackets and quotes around the label are left to the label
# pattern, so a label that itself contains one ("[1]") can still match.
_GAP = (
    r"[\s*_:]*(?:(?:\$|\\\(|\\\[|\\text(?:bf)?\{|\})[\s*_:]*){0,4}"  # LaTeX around it: $A$, \( B \), \text{A}
    + r"(?:(?:option|choice|letter|opción|l['’]option|選択肢|选项|вариант)" + _END + r"[\s:#]*)?"
)
CUE = re.compile(NO_ALNUM_BEFORE + "(?:" + "|".join(_CUES) + ")" + _GAP, re.IGNORECASE)

# "B or C", "A and B", "B, C", "(D, F, I)", "B (or D": a hedge between labels is not an answer.
HEDGE = re.compile(r"[)\]}'\"’”*_]*(?:\s+(?:or|and)\s+|\s*[,/&]\s*|\s+\(or\s+)", re.IGNORECASE)
# "is D. <D's own text>": read only when the option's own text follows the label.
IS_CUE = re.compile(NO_ALNUM_BEFORE + r"(?:is|are)[^\S\n]*:?[^\S\n]*", re.IGNORECASE)
# Words that mark an answer statement as the final word after earlier answers that differ.
FINAL = re.compile(r"final|\\boxed|actually|correction|corrected|revised|revision", re.IGNORECASE)

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
    + r"|as\s+an\s+AI|there\s+is\s+no\s+(?:correct|right|valid)\s+(?:answer|option|choice)"
    + r"|cannot\s+be\s+determined|(?:not\s+enough|insufficient)\s+information"
    + r"|I\s+do(?:\s+not|n't)\s+know|" + _NONE_CORRECT + ")" + _END,
    re.IGNORECASE,
)
