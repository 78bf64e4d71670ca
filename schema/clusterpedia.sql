-- Clusterpedia's internalstorage table `resources`, exactly as GORM AutoMigrate
-- creates it on PostgreSQL (Clusterpedia pkg/storage/internalstorage/types.go,
-- gorm.io/driver/postgres): same names, types, NOT NULLs, default and indexes,
-- so walwatch is tested against the table a real Clusterpedia writes.
--   * uint primaryKey       -> bigserial, PRIMARY KEY ("id")
--   * string size:N         -> varchar(N); types.UID (string) likewise
--   * datatypes.JSON/JSONMap -> JSONB
--   * time.Time/sql.NullTime -> timestamptz
--   * the `length:` index options are MySQL-only; PostgreSQL ignores them.
-- Idempotent: safe to run on an empty database or on one Clusterpedia already
-- migrated (CREATE ... IF NOT EXISTS).
--
-- Plus what walwatch needs and Clusterpedia does not do: REPLICA IDENTITY FULL
-- (see replica_identity.sql for why). Apply with
--   psql -v ON_ERROR_STOP=1 -f schema/clusterpedia.sql

CREATE TABLE IF NOT EXISTS "resources" (
  "id"                      bigserial,
  "group"                   varchar(63)  NOT NULL,
  "version"                 varchar(15)  NOT NULL,
  "resource"                varchar(63)  NOT NULL,
  "kind"                    varchar(63)  NOT NULL,
  "cluster"                 varchar(253) NOT NULL,
  "namespace"               varchar(253) NOT NULL,
  "name"                    varchar(253) NOT NULL,
  "owner_uid"               varchar(36)  NOT NULL DEFAULT '',
  "uid"                     varchar(36)  NOT NULL,
  "resource_version"        varchar(30)  NOT NULL,
  "object"                  JSONB        NOT NULL,
  "events"                  JSONB,
  "event_resource_versions" JSONB,
  "created_at"              timestamptz  NOT NULL,
  "synced_at"               timestamptz  NOT NULL,
  "deleted_at"              timestamptz,
  PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX IF NOT EXISTS "uni_group_version_resource_cluster_namespace_name"
  ON "resources" ("group", "version", "resource", "cluster", "namespace", "name");
CREATE INDEX IF NOT EXISTS "idx_group_version_resource_namespace_name"
  ON "resources" ("group", "version", "resource", "namespace", "name");
CREATE INDEX IF NOT EXISTS "idx_group_version_resource_name"
  ON "resources" ("group", "version", "resource", "name");
CREATE INDEX IF NOT EXISTS "idx_cluster"
  ON "resources" ("cluster");

-- walwatch: UPDATE and DELETE must carry the whole old row (replica_identity.sql).
ALTER TABLE "resources" REPLICA IDENTITY FULL;
