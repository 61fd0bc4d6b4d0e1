"""Programs that run on a rented box, sent as the source of `python3 -`.

Each module here is standard library only and keeps to Python 3.6 syntax (a
test parses them all that way): a box's own python3 may be old.
"""
