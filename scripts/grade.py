"""``make grade``: grade a folder of submitted notebooks, each in a sandbox.

The code lives in :mod:`selfattention_course.grade` (the command
``selfattention-grade``); this script calls it, with the same options.
"""

import sys

from selfattention_course.grade import main

if __name__ == "__main__":
    sys.exit(main())
