"""The record every tests/exercise_answers_NN.py table is made of (read by tests/test_exercises.py).

Per exercise: a correct answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids. The check
must accept the first and reject the other two; for the shortcut it must also print the teaching message ``says``
(in English; the Chinese message is printed by the same branch).
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
