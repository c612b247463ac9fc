#!/bin/sh
# Runs once, on the postgres image's first start (/docker-entrypoint-initdb.d), as its
# superuser: creates memoryd's database owner — a login with CREATEROLE and nothing more,
# never a superuser — and the database it owns. `memoryd migrate` (the migrate service) then
# creates memoryd_app and memoryd_worker as that owner and sets their passwords.
set -eu
owner_password=$(cat "${MEMORYD_OWNER_PASSWORD_FILE:-/run/secrets/owner_password}")
psql -v ON_ERROR_STOP=1 -v owner_password="$owner_password" --no-psqlrc --dbname postgres <<'SQL'
CREATE ROLE memoryd LOGIN CREATEROLE NOSUPERUSER NOCREATEDB NOBYPASSRLS PASSWORD :'owner_password';
CREATE DATABASE memoryd OWNER memoryd;
SQL
