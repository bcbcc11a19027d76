"""The record every tests/exercise_answers_NN.py table is made of (read by tests/test_exercises.py).

Per exercise: a correct answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids. The check
must accept the first and reject the other two; for the shortcut it must also print the teaching message ``says``
(in English; the Chinese message is printed by the same branch). ``also`` lists more answers the check must refuse,
each with part of its message: other routes to the shortcut, wrong answers found by reviewers, and the hostile
ones (an input changed in place, a string for a number, a function that never returns). ``right`` lists more
correct answers in other styles (another vectorisation, another dtype, a ``torch.device`` for a name): a check must
never refuse a right answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Answer:
    check: str                      # the lesson's check_* function
    correct: Callable
    wrong: Callable                 # a plausible mistake
    shortcut: Callable              # what the exercise rules out
    says: str                       # part of the message the shortcut gets
    args: tuple = field(default=())  # extra arguments of the check after the student's function
    also: tuple = field(default=())  # ((answer, part of the message it must get), ...): each must be refused
    right: tuple = field(default=())  # more correct answers, written in other styles: each must pass
