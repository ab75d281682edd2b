"""Teaching with the book: assignments and a grader that students cannot game.

========================  ==================================================
module                    what it does
========================  ==================================================
``assign``                student notebooks and the grader's manifest from
                          the chapters (``selfattention-assign``)
``cli``                   ``selfattention-grade``: options, a folder
                          graded, a class's rows
``grade``                 grades one submission: identification, the
                          sandboxed run, the judges, the rows
``notebook``              a submitted notebook's chapter, the copy that
                          runs, what is kept of its run
``load``                  whether neighbours cut a run short (a second
                          grading)
``processes``             a job's processes as the runner sees them
``results``               results only the harvest can write
``judges``                the judges of every exercise, hidden cases
``review``                what sends an answer for review, read from its
                          source
``intake``                reads submitted files that may be hostile
``sandbox``               runs one notebook in isolation (bubblewrap,
                          docker/podman)
``runner``                inside the sandbox: runs the notebook, then the
                          harvest
``harvest``               inside the student's kernel: the answers on the
                          hidden cases, as plain data
``wire``                  plain data between the two, without pickle
``gradebook``             writes the gradebook folder
``written``               written parts: Gradescope's questions,
                          scoresheets merged into the gradebook
``gradescope``            Gradescope autograders (``make gradescope``) and
                          the grading inside their container
``bench``                 grades a synthetic class and times it
``names``                 names shared by all of these
========================  ==================================================

The exercises themselves are declared in :mod:`selfattention_exercises`,
whose checks find the judges through the entry point group
``selfattention_exercises.judges`` that this package registers. It imports
the library, the models and the checks, and the book's plain conversion
(:mod:`selfattention_book.plain`, for ``assign``); none of them imports it.
"""
