"""Column sizes the store checks before writing; schema.py declares the columns with them.

Kept apart from schema.py so that the store's hot paths (and a server's start) need not import
SQLAlchemy.
"""

STREAM_ID_MAX = 200
EVENT_TYPE_MAX = 200
COMMAND_ID_MAX = 200
PROJECTION_NAME_MAX = 100
KEY_ID_MAX = 32
