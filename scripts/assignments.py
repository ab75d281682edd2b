"""``make assignments``: student notebooks and the grader's manifest.

The code lives in :mod:`selfattention_course.assign` (the command
``selfattention-assign``); this script calls it, with the same options.
"""

import sys

from selfattention_course.assign import main

if __name__ == "__main__":
    sys.exit(main())
