-- PostgreSQL roles for Bergen, before the first migration. As a superuser:
--   psql -d bergen -v ON_ERROR_STOP=1 -f deploy/roles.sql
-- The owner runs the migrations (`bergen migrate`); the server runs as bergen_app, which
-- can add and read events but never change or remove one (deploy/grants.sql). The
-- migrations' triggers refuse UPDATE, DELETE and TRUNCATE on events even to the owner.
CREATE ROLE bergen_owner LOGIN PASSWORD 'change-me';
CREATE ROLE bergen_app LOGIN PASSWORD 'change-me';
GRANT CONNECT ON DATABASE bergen TO bergen_owner, bergen_app;
GRANT CREATE, USAGE ON SCHEMA public TO bergen_owner;
