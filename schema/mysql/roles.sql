-- The account walwatch connects as on MySQL or MariaDB: least privilege.
--
--   mariadb --init-command="SET @walwatch_password = '...'" clusterpedia < schema/mysql/roles.sql
--   (or `mysql` with the same arguments)
--
-- Run it in the Clusterpedia database (the SELECT grant names DATABASE()) as
-- an account that may create users and grant these privileges. Optional:
-- @walwatch_host (default '%'), the host part of the account. Idempotent:
-- creates the account if missing, (re)sets its password and grants either way.
-- Feed it on standard input: in batch mode the client stops at the first
-- error, so a missing password stops the script before it changes anything
-- (SOURCE, by contrast, goes on after errors).
--
-- What walwatch does with it, and why each privilege:
--   REPLICATION SLAVE  -- it reads the binary log as a replica does
--                        (COM_BINLOG_DUMP); no replica is configured.
--   REPLICATION CLIENT -- SHOW MASTER STATUS / SHOW BINARY LOGS: where the
--                        binlog ends and which files the server still keeps.
--                        (MariaDB 10.5+ calls it BINLOG MONITOR and accepts
--                        the old name.)
--   SELECT on resources -- the initial state (watch without resourceVersion,
--                        WatchList) is read from the table, and the startup
--                        checks read its columns.
-- Nothing else. REPLICATION SLAVE lets an account read every change to every
-- table on the server through the binlog: treat it as read access to the
-- whole server, and guard the password accordingly.
--
-- The statements are prepared from strings because CREATE USER and GRANT take
-- no variables; QUOTE() quotes the password and host.

SET @walwatch_host = COALESCE(@walwatch_host, '%');
SET @roles_sql = IF(COALESCE(@walwatch_password, '') = '',
  'SELECT `roles.sql: SET @walwatch_password = ''...'' first`',
  IF(DATABASE() IS NULL,
     'SELECT `roles.sql: run it in the Clusterpedia database (mariadb DBNAME)`',
     'DO 1'));
PREPARE roles_stmt FROM @roles_sql;
EXECUTE roles_stmt;
DEALLOCATE PREPARE roles_stmt;

SET @roles_sql = CONCAT('CREATE USER IF NOT EXISTS ''walwatch''@', QUOTE(@walwatch_host),
                        ' IDENTIFIED BY ', QUOTE(@walwatch_password));
PREPARE roles_stmt FROM @roles_sql;
EXECUTE roles_stmt;
DEALLOCATE PREPARE roles_stmt;

SET @roles_sql = CONCAT('ALTER USER ''walwatch''@', QUOTE(@walwatch_host),
                        ' IDENTIFIED BY ', QUOTE(@walwatch_password));
PREPARE roles_stmt FROM @roles_sql;
EXECUTE roles_stmt;
DEALLOCATE PREPARE roles_stmt;

SET @roles_sql = CONCAT('GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO ''walwatch''@',
                        QUOTE(@walwatch_host));
PREPARE roles_stmt FROM @roles_sql;
EXECUTE roles_stmt;
DEALLOCATE PREPARE roles_stmt;

SET @roles_sql = CONCAT('GRANT SELECT ON `', REPLACE(DATABASE(), '`', '``'),
                        '`.`resources` TO ''walwatch''@', QUOTE(@walwatch_host));
PREPARE roles_stmt FROM @roles_sql;
EXECUTE roles_stmt;
DEALLOCATE PREPARE roles_stmt;

SET @roles_sql = NULL;

-- On MySQL 8 (read, not run here) the same statements work; the account gets
-- caching_sha2_password, which MariaDB Connector/C supports through its
-- caching_sha2_password plugin: over TLS, or with the server's RSA public key
-- on a plain connection.
