"""The book's tooling: what turns the chapters into the site's other
editions. :mod:`~selfattention_book.slides` writes a reveal.js deck per
chapter; :mod:`~selfattention_book.pdf` prints the book and its course
edition to PDF. Neither imports the grader's judges, harvest or sandbox.
"""
