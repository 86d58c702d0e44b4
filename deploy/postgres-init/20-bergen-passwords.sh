#!/bin/sh
# Run once by the PostgreSQL container when it initialises its data directory
# (/docker-entrypoint-initdb.d, after 10-roles.sql: deploy/roles.sql): gives the two roles their
# passwords from the files BERGEN_OWNER_PASSWORD_FILE and BERGEN_APP_PASSWORD_FILE name.
set -eu
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" -q \
    -v owner="$(cat "$BERGEN_OWNER_PASSWORD_FILE")" \
    -v app="$(cat "$BERGEN_APP_PASSWORD_FILE")" <<'SQL'
ALTER ROLE bergen_owner PASSWORD :'owner';
ALTER ROLE bergen_app PASSWORD :'app';
SQL
