"""Teaching with the book: assignments and a grader that students cannot game.

========================  ==================================================
module                    what it does
========================  ==================================================
``assign``                student notebooks and the grader's manifest from
                          the chapters (``selfattention-assign``)
``grade``                 grades a folder of submissions
                          (``selfattention-grade``)
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

The exercises themselves are declared in :mod:`selfattention_exercises`;
this package imports the library, never the other way round.
"""
