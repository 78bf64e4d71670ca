package testenv

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// The collector's statements, as GORM renders them (tests/tools/
// demo_store_postgres.cc and demo_store_mysql.cc hold the same for the C++
// demo writer): every write one autocommit statement (SkipDefaultTransaction),
// map keys sorted, so that the SET list is alphabetical and the WHERE of the
// six keys is cluster, group, name, namespace, resource, version.

// PostgreSQL: "quoted" identifiers, $n parameters, INSERT ... RETURNING
// "id", JSONB_SET.
const (
	pgInsert = `INSERT INTO "resources" ("group","version","resource","kind","cluster","namespace","name","owner_uid","uid","resource_version","object","events","event_resource_versions","created_at","synced_at","deleted_at") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,NULL,NULL,$12,$13,$14) RETURNING "id"`

	pgUpdate = `UPDATE "resources" SET "created_at"=$1,"object"=$2,"owner_uid"=$3,"resource_version"=$4,"uid"=$5,"synced_at"=$6 WHERE "resources"."cluster" = $7 AND "resources"."group" = $8 AND "resources"."name" = $9 AND "resources"."namespace" = $10 AND "resources"."resource" = $11 AND "resources"."version" = $12`

	// With a deletionTimestamp the collector also sets deleted_at (sorted in).
	pgUpdateDeleting = `UPDATE "resources" SET "created_at"=$1,"deleted_at"=$2,"object"=$3,"owner_uid"=$4,"resource_version"=$5,"uid"=$6,"synced_at"=$7 WHERE "resources"."cluster" = $8 AND "resources"."group" = $9 AND "resources"."name" = $10 AND "resources"."namespace" = $11 AND "resources"."resource" = $12 AND "resources"."version" = $13`

	pgEvent = `UPDATE "resources" SET "event_resource_versions"=JSONB_SET(COALESCE(event_resource_versions, '{}'), $1, $2, true),"events"=JSONB_SET(COALESCE(events, '{}'), $3, $4, true) WHERE "resources"."cluster" = $5 AND "resources"."uid" = $6`

	pgDelete = `DELETE FROM "resources" WHERE "resources"."cluster" = $1 AND "resources"."group" = $2 AND "resources"."name" = $3 AND "resources"."namespace" = $4 AND "resources"."resource" = $5 AND "resources"."version" = $6`

	pgDeleteCluster = `DELETE FROM "resources" WHERE "resources"."cluster" = $1`
)

// MySQL and MariaDB (gorm.io/driver/mysql): `quoted` identifiers, ?
// parameters of server-side prepared statements (go-sql-driver/mysql
// without interpolateParams), the new id from the OK packet, JSON_SET.
const (
	myInsert = "INSERT INTO `resources` (`group`,`version`,`resource`,`kind`,`cluster`,`namespace`,`name`,`owner_uid`,`uid`,`resource_version`,`object`,`events`,`event_resource_versions`,`created_at`,`synced_at`,`deleted_at`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

	myUpdate = "UPDATE `resources` SET `created_at`=?,`object`=?,`owner_uid`=?,`resource_version`=?,`uid`=?,`synced_at`=? WHERE `resources`.`cluster` = ? AND `resources`.`group` = ? AND `resources`.`name` = ? AND `resources`.`namespace` = ? AND `resources`.`resource` = ? AND `resources`.`version` = ?"

	myUpdateDeleting = "UPDATE `resources` SET `created_at`=?,`deleted_at`=?,`object`=?,`owner_uid`=?,`resource_version`=?,`uid`=?,`synced_at`=? WHERE `resources`.`cluster` = ? AND `resources`.`group` = ? AND `resources`.`name` = ? AND `resources`.`namespace` = ? AND `resources`.`resource` = ? AND `resources`.`version` = ?"

	// The event as JSON (JSON_EXTRACT of the text: MariaDB has no CAST AS
	// JSON), the RV as a number, '$."key"' paths.
	myEvent = "UPDATE `resources` SET `event_resource_versions`=JSON_SET(COALESCE(`event_resource_versions`, '{}'), ?, ?),`events`=JSON_SET(COALESCE(`events`, '{}'), ?, JSON_EXTRACT(?, '$')) WHERE `resources`.`cluster` = ? AND `resources`.`uid` = ?"

	myDelete = "DELETE FROM `resources` WHERE `resources`.`cluster` = ? AND `resources`.`group` = ? AND `resources`.`name` = ? AND `resources`.`namespace` = ? AND `resources`.`resource` = ? AND `resources`.`version` = ?"

	myDeleteCluster = "DELETE FROM `resources` WHERE `resources`.`cluster` = ?"
)

// store runs the collector's statements on one database.
type store struct {
	db      *sql.DB
	dialect walwatch.Dialect
}

// errDuplicate is an INSERT that hit the unique index: the collector's
// createOrUpdateResource then updates.
var errDuplicate = errors.New("the row exists")

// insert is ADDED: the whole row.
func (s store) insert(ctx context.Context, o *object, object string, synced time.Time) error {
	g := o.res.GVR
	var deleted any
	if o.deleting != nil {
		deleted = *o.deleting
	}
	var err error
	if s.dialect == walwatch.Postgres {
		var id int64
		err = s.db.QueryRowContext(ctx, pgInsert, g.Group, g.Version, g.Resource, o.res.Kind, o.cluster, o.namespace, o.name,
			o.ownerUID(), o.uid, rvText(o.rv), object, o.created, synced, deleted).Scan(&id)
	} else {
		_, err = s.db.ExecContext(ctx, myInsert, g.Group, g.Version, g.Resource, o.res.Kind, o.cluster, o.namespace, o.name,
			o.ownerUID(), o.uid, rvText(o.rv), object, nil, nil, o.created, synced, deleted)
	}
	if isDuplicate(err) {
		return errDuplicate
	}
	return err
}

// update is MODIFIED (and the folded delete and re-create, with a new
// uid): created_at, [deleted_at,] object, owner_uid, resource_version, uid,
// synced_at WHERE the six keys. It returns the rows changed.
func (s store) update(ctx context.Context, o *object, object string, synced time.Time) (int64, error) {
	g := o.res.GVR
	set := []any{o.created}
	query := pgUpdate
	if s.dialect == walwatch.MySQL {
		query = myUpdate
	}
	if o.deleting != nil {
		set = append(set, *o.deleting)
		query = pgUpdateDeleting
		if s.dialect == walwatch.MySQL {
			query = myUpdateDeleting
		}
	}
	args := append(set, object, o.ownerUID(), rvText(o.rv), o.uid, synced, o.cluster, g.Group, o.name, o.namespace, g.Resource, g.Version)
	return rowsChanged(s.db.ExecContext(ctx, query, args...))
}

// recordEvent is the event recording: event_resource_versions[rvKey] = rv
// and events[eventUID] = event WHERE cluster AND uid; the object column is
// not touched.
func (s store) recordEvent(ctx context.Context, cluster, uid, rvKey string, rv uint64, eventUID, event string) (int64, error) {
	if s.dialect == walwatch.Postgres {
		// JSONB_SET's paths are text[] literals; the RV is a JSON number.
		return rowsChanged(s.db.ExecContext(ctx, pgEvent, textArray(rvKey), rvText(rv), textArray(eventUID), event, cluster, uid))
	}
	return rowsChanged(s.db.ExecContext(ctx, myEvent, jsonPath(rvKey), rv, jsonPath(eventUID), event, cluster, uid))
}

// delete is DELETED: WHERE the six keys.
func (s store) delete(ctx context.Context, r Resource, cluster, namespace, name string) (int64, error) {
	query := pgDelete
	if s.dialect == walwatch.MySQL {
		query = myDelete
	}
	g := r.GVR
	return rowsChanged(s.db.ExecContext(ctx, query, cluster, g.Group, name, namespace, g.Resource, g.Version))
}

// deleteCluster is Clusterpedia's CleanCluster: every row of the cluster in
// one statement.
func (s store) deleteCluster(ctx context.Context, cluster string) (int64, error) {
	query := pgDeleteCluster
	if s.dialect == walwatch.MySQL {
		query = myDeleteCluster
	}
	return rowsChanged(s.db.ExecContext(ctx, query, cluster))
}

func rowsChanged(result sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return result.RowsAffected()
}

func rvText(rv uint64) string { return strconv.FormatUint(rv, 10) }

// textArray is a one-element PostgreSQL text[] literal, {"key"}.
func textArray(key string) string {
	return `{"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"}`
}

// jsonPath is a MySQL JSON path to the top-level key, $."key".
func jsonPath(key string) string {
	return `$."` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505" // unique_violation
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == 1062 // ER_DUP_ENTRY
	}
	return false
}
