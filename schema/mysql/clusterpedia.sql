-- Clusterpedia's internalstorage table `resources` on MySQL/MariaDB, exactly
-- as GORM AutoMigrate creates it with Clusterpedia's MySQL driver, so that
-- walwatch is tested against the table a real Clusterpedia writes.
--
-- Derived from (read in their sources, not run here):
--   * clusterpedia-io/clusterpedia pkg/storage/internalstorage/types.go
--     (struct Resource, 2025: Events/EventResourceVersions are JSONMap and
--     nullable "since MySQL doesn't allow setting default values for JSON
--     fields"); register.go opens gorm.io/driver/mysql v1.6.0 with
--     gmysql.New(Config{Conn}) and no other options, and sets no
--     "gorm:table_options"; go.mod: gorm v1.30.0, datatypes v1.2.5.
--   * gorm.io/driver/mysql v1.6.0 mysql.go DataTypeOf:
--       uint (primaryKey, so AUTO_INCREMENT) -> bigint unsigned AUTO_INCREMENT
--       string / types.UID size:N            -> varchar(N)
--       time.Time, sql.NullTime              -> datetime(3) (DefaultDatetimePrecision
--                                               is 3), "NULL" appended when nullable
--   * gorm.io/datatypes v1.2.5: JSON and JSONMap on "mysql" -> JSON.
--   * gorm v1.30.0 migrator.CreateTable: columns in field order, PRIMARY KEY,
--     then the indexes inline ("UNIQUE INDEX name (cols)"), in the order their
--     names first appear among the fields; `length:N` -> `col`(N).
--   * Clusterpedia's own MySQL deployment runs mysql:8 with defaults.
-- GORM adds no ENGINE, CHARSET or COLLATE: the table takes the database's
-- defaults. Create the database as utf8mb4 (MySQL 8's default; MariaDB's
-- built-in default is latin1, Debian's packaged config sets utf8mb4).
--
-- MariaDB 10.11 (checked here): JSON is an alias of LONGTEXT with a
-- json_valid() CHECK, collation utf8mb4_bin, so the binlog carries the JSON
-- text as the client wrote it. MySQL 8 (not available here, read only): JSON
-- is a native binary type, datetime(3) and the indexes are the same, the
-- default collation is utf8mb4_0900_ai_ci, and the binlog carries JSON in
-- MySQL's binary format (cdc/mysql/mysql_json.h decodes it).
--
-- Idempotent (IF NOT EXISTS; GORM itself checks for the table first). Apply
-- in the Clusterpedia database:
--   mariadb clusterpedia < schema/mysql/clusterpedia.sql
-- walwatch needs nothing of the table beyond this; what it needs of the
-- server (binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL)
-- is checked at startup (cdc/mysql/mysql_checks.h).

CREATE TABLE IF NOT EXISTS `resources` (
  `id` bigint unsigned AUTO_INCREMENT,
  `group` varchar(63) NOT NULL,
  `version` varchar(15) NOT NULL,
  `resource` varchar(63) NOT NULL,
  `kind` varchar(63) NOT NULL,
  `cluster` varchar(253) NOT NULL,
  `namespace` varchar(253) NOT NULL,
  `name` varchar(253) NOT NULL,
  `owner_uid` varchar(36) NOT NULL DEFAULT '',
  `uid` varchar(36) NOT NULL,
  `resource_version` varchar(30) NOT NULL,
  `object` JSON NOT NULL,
  `events` JSON,
  `event_resource_versions` JSON,
  `created_at` datetime(3) NOT NULL,
  `synced_at` datetime(3) NOT NULL,
  `deleted_at` datetime(3) NULL,
  PRIMARY KEY (`id`),
  UNIQUE INDEX `uni_group_version_resource_cluster_namespace_name`
    (`group`,`version`,`resource`,`cluster`(100),`namespace`(50),`name`(100)),
  INDEX `idx_group_version_resource_namespace_name`
    (`group`,`version`,`resource`,`namespace`,`name`),
  INDEX `idx_group_version_resource_name` (`group`,`version`,`resource`,`name`),
  INDEX `idx_cluster` (`cluster`)
);
