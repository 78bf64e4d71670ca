-- The database role walwatch connects as: least privilege.
--
--   psql -v ON_ERROR_STOP=1 -v password='...' -d clusterpedia -f schema/roles.sql
--
-- Run as a superuser (or a role with CREATEROLE that may grant REPLICATION).
-- Idempotent: creates the role if missing, and (re)sets its attributes and
-- password either way.
--
-- What walwatch does with it, and why each privilege:
--   LOGIN        -- it connects.
--   REPLICATION  -- it opens a `replication=database` connection, creates its
--                   logical slot (wal2json) and streams from it. Note that
--                   PostgreSQL 15.19 and later have `output_plugin_libraries`
--                   (CVE-2026-6471; Debian 12's 15.19-0+deb12u1 security
--                   update) and only let REPLICATION users use the plugins
--                   listed there: add wal2json to it in postgresql.conf.
--   SELECT on resources -- the initial state (watch without resourceVersion,
--                   WatchList) is read from the table inside the slot's snapshot.
-- Nothing else: no INSERT/UPDATE/DELETE, no other tables. (REPLICATION lets a
-- role read every change of every table through a slot: treat it as read
-- access to the whole database's WAL, and guard the password accordingly.)
-- Changing the table's REPLICA IDENTITY needs its owner, not this role: see
-- replica_identity.sql.
--
-- Not granted here: pg_monitor. Before PostgreSQL 17, `walwatch slots list`
-- and `walwatch slots drop --inactive-for` estimate how long a slot has been
-- inactive from the WAL directory (pg_ls_waldir), which needs it. Grant it to
-- the role that runs those commands (this one, if they use walwatch's
-- conninfo):  GRANT pg_monitor TO walwatch;

\set ON_ERROR_STOP on
\if :{?password}
\else
  DO $$ BEGIN RAISE EXCEPTION 'roles.sql: no password; run psql -v password=... -f schema/roles.sql'; END $$;
\endif

SELECT 'CREATE ROLE walwatch'
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walwatch') \gexec

ALTER ROLE walwatch WITH LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE
  PASSWORD :'password';

-- Schema usage (PUBLIC has it on `public` by default; explicit for databases
-- that revoked it) and read access to the one table.
GRANT USAGE ON SCHEMA public TO walwatch;
GRANT SELECT ON TABLE public.resources TO walwatch;
