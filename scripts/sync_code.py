"""Write the library's code into the chapter cells that show it
(:mod:`selfattention_book.sync`; ``make execute`` runs it first).

Usage: python scripts/sync_code.py [--check] chapters/*.ipynb
"""

import sys

from selfattention_book.sync import main

if __name__ == "__main__":
    sys.exit(main())
