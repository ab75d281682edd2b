"""Answers for the tests of the exercise checks.

A check reports an answer that calls the library's own version of what the
exercise asks for "for review". The tests often need a right (or a
deliberately wrong) answer built from the library; :func:`own` gives them a
copy of a library function with a code object of its own, placed where the
library has none, which is what a student who retyped the function would
have.
"""

import inspect
import types


def own(fn):
    """A copy of ``fn`` (without its argument checks) that is not ``fn``."""
    bare = inspect.unwrap(fn)
    code = bare.__code__.replace(co_filename="<retyped>")
    return types.FunctionType(code, bare.__globals__,
                              bare.__name__, bare.__defaults__,
                              bare.__closure__)
