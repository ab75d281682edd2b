"""Names shared by the assignment maker, the grader and the sandbox runner.

Each is defined here once: the metadata key of the notebooks, the markers
of a solution, the files of a grading job and of a gradebook. The statuses
of an exercise are those of :mod:`selfattention_exercises.core`.
"""

from __future__ import annotations

from selfattention_exercises.core import (CORRECT, FOR_REVIEW, MARKS,
                                          NOT_DONE, NOT_GRADED, REFUSED,
                                          TO_BE_READ, WRONG)

__all__ = ["META", "BEGIN", "END", "STUB", "WRITTEN_STUB", "COLUMNS",
           "CORRECT", "WRONG", "NOT_DONE", "FOR_REVIEW", "NOT_GRADED",
           "TO_BE_READ", "REFUSED", "MARKS", "Problem"]

#: Key of this book's entries in notebook and cell metadata.
META = "selfattention"

# A solution region inside a code cell tagged "solution", and what the
# student version puts in its place.
BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB = "...  # your code here"
#: The text of a written answer cell before the student writes in it.
WRITTEN_STUB = "*Write your answer here.*"

# A grading job, as the sandbox sees it (read-only, at JOB_MOUNT).
JOB_MOUNT = "/job"
JOB_FILE = "job.json"
JOB_NOTEBOOK = "notebook.ipynb"
#: Inside the sandbox: where the kernel runs and where the harvest writes.
SCRATCH = "/tmp"
WORK_DIR = "/tmp/work"
HARVEST_DIR = "/tmp/harvest"

# Parts of what the runner writes to its standard output.
PART_REPORT = "report"
PART_EXECUTED = "executed"
PART_HARVEST = "harvest-{index}"

# A gradebook folder.
GRADEBOOK = "gradebook.csv"
#: The same grades, one column per assignment (chapter), for an LMS import.
CANVAS_CSV = "canvas.csv"
MOODLE_CSV = "moodle.csv"
FEEDBACK_DIR = "feedback"
EXECUTED_DIR = "executed"
WRITTEN_DIR = "written"
RUN_FILE = "run.json"
#: The gradebook's columns, in order.
COLUMNS = ("student", "chapter", "exercise", "points", "max_points",
           "diagnosis", "feedback")


class Problem(str):
    """A problem met while reading, running or grading one notebook.

    It is its text, for the student's feedback (a ``str``: it prints,
    formats and compares as one), with a ``code``: the kind of problem in
    one kebab-case word, which stays the same when the text is reworded
    (a notebook that is handed in without a chapter gets one gradebook row
    per problem, with that code as its diagnosis). Each code is documented
    where its problems are made: :mod:`~selfattention_course.intake` (files
    refused), :mod:`~selfattention_course.sandbox` (a job stopped) and
    :mod:`~selfattention_course.grade` (notebooks and runs).
    """

    code: str

    def __new__(cls, text: str, code: str):
        self = super().__new__(cls, text)
        self.code = code
        return self

    def __getnewargs__(self):              # copy and pickle keep the code
        return str(self), self.code
