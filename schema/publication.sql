-- The publication walwatch streams with --plugin pgoutput: the `resources`
-- table's inserts, updates, deletes and truncates (pgoutput sends only the
-- changes of the tables a publication names; wal2json needs none).
--
-- walwatch creates it by itself at startup when it is missing and its role
-- may (it owns the table, or is a superuser). Run this instead when it may
-- not, and always on the primary: a standby cannot create one, and walwatch
-- decoding on a standby finds the primary's through replication.
--
-- The name must match --publication, which defaults to the slot's name
-- (--slot, walwatch by default); set it with -v publication=NAME. Needs
-- ownership of the table. Idempotent. Apply with
--   psql -v ON_ERROR_STOP=1 -d clusterpedia -f schema/publication.sql
--   psql -v ON_ERROR_STOP=1 -d clusterpedia -v publication=walwatch_a -f schema/publication.sql

\if :{?publication}
\else
  \set publication walwatch
\endif

SELECT NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = :'publication')
  AS create_publication \gset
\if :create_publication
  CREATE PUBLICATION :"publication" FOR TABLE "resources"
    WITH (publish = 'insert, update, delete, truncate');
\else
  -- Already there: make sure it publishes the table and every change kind.
  SELECT NOT EXISTS (SELECT 1 FROM pg_publication_tables
                     WHERE pubname = :'publication' AND tablename = 'resources')
    AS add_table \gset
  \if :add_table
    ALTER PUBLICATION :"publication" ADD TABLE "resources";
  \endif
  ALTER PUBLICATION :"publication" SET (publish = 'insert, update, delete, truncate');
\endif
