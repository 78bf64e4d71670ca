package walwatchstorage

import (
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// where adds to db (a statement on the table) the rows of one resource that
// q selects: what internalstorage's applyListOptionsToQuery selects, in the
// same SQL shapes (labels and fields as JSON paths into `object`, owners as
// nested subqueries on owner_uid), except that what it would skip silently
// was refused by newQuery.
func where(db *gorm.DB, dialect walwatch.Dialect, table string, gvr schema.GroupVersionResource, q *query) *gorm.DB {
	db = db.Where(clause.Eq{Column: clause.Column{Name: "group"}, Value: gvr.Group}).
		Where(clause.Eq{Column: clause.Column{Name: "version"}, Value: gvr.Version}).
		Where(clause.Eq{Column: clause.Column{Name: "resource"}, Value: gvr.Resource})
	db = whereIn(db, "cluster", q.clusters)
	db = whereIn(db, "namespace", q.namespaces)
	db = whereIn(db, "name", q.names)
	if q.since != nil {
		db = db.Where(clause.Gte{Column: clause.Column{Name: "created_at"}, Value: *q.since})
	}
	if q.before != nil {
		db = db.Where(clause.Lt{Column: clause.Column{Name: "created_at"}, Value: *q.before})
	}
	for _, r := range q.labels {
		db = db.Where(jsonCondition{
			value:  jsonValue{dialect: dialect, path: []string{"metadata", "labels", r.Key()}},
			op:     r.Operator(),
			values: r.Values().List(),
		})
	}
	for _, name := range q.fuzzyNames {
		db = db.Where(clause.Like{Column: clause.Column{Name: "name"}, Value: "%" + name + "%"})
	}
	for _, f := range q.fields {
		db = db.Where(jsonCondition{value: jsonValue{dialect: dialect, path: f.path}, op: f.op, values: f.values})
	}
	if q.ownerUID != "" || q.ownerName != "" {
		db = whereOwner(db, table, q)
	}
	return db
}

func whereIn(db *gorm.DB, column string, values []string) *gorm.DB {
	switch len(values) {
	case 0:
		return db
	case 1:
		return db.Where(clause.Eq{Column: clause.Column{Name: column}, Value: values[0]})
	default:
		in := make([]any, len(values))
		for i, v := range values {
			in[i] = v
		}
		return db.Where(clause.IN{Column: clause.Column{Name: column}, Values: in})
	}
}

// whereOwner selects the objects whose controller is the owner q names, or
// (OwnerSeniority n) the owner's descendants n generations further down, in
// q's one cluster; as internalstorage's buildOwnerQueryByUID/ByName.
func whereOwner(db *gorm.DB, table string, q *query) *gorm.DB {
	cluster := q.clusters[0]
	sub := func() *gorm.DB {
		return db.Session(&gorm.Session{NewDB: true}).Table(table).Select("uid").
			Where(clause.Eq{Column: clause.Column{Name: "cluster"}, Value: cluster})
	}
	if q.ownerUID != "" {
		if q.seniority == 0 {
			return db.Where(clause.Eq{Column: clause.Column{Name: "owner_uid"}, Value: q.ownerUID})
		}
		owners := sub().Where(clause.Eq{Column: clause.Column{Name: "owner_uid"}, Value: q.ownerUID})
		for i := 1; i < q.seniority; i++ {
			owners = sub().Where("owner_uid IN (?)", owners)
		}
		return db.Where("owner_uid IN (?)", owners)
	}
	owners := sub()
	if !q.ownerGR.Empty() {
		owners = owners.Where(clause.Eq{Column: clause.Column{Name: "group"}, Value: q.ownerGR.Group}).
			Where(clause.Eq{Column: clause.Column{Name: "resource"}, Value: q.ownerGR.Resource})
	}
	if len(q.namespaces) != 0 {
		// The owner may be namespaced or cluster-scoped.
		owners = whereIn(owners, "namespace", append(append([]string{}, q.namespaces...), ""))
	}
	owners = owners.Where(clause.Eq{Column: clause.Column{Name: "name"}, Value: q.ownerName})
	for i := 0; i < q.seniority; i++ {
		owners = sub().Where("owner_uid IN (?)", owners)
	}
	return db.Where("owner_uid IN (?)", owners)
}

// order orders the rows as q asks, then by id, so that a snapshot's pages
// (OFFSET) partition one fixed order.
func order(db *gorm.DB, dialect walwatch.Dialect, q *query) *gorm.DB {
	for _, o := range q.orderBy {
		column := clause.Column{Name: o.Field}
		if o.Field == "resource_version" {
			// Member clusters' RVs are decimal strings; compare them as
			// numbers. MySQL's DECIMAL defaults to 10 digits, too few.
			cast := "CAST(resource_version AS numeric)"
			if dialect == walwatch.MySQL {
				cast = "CAST(resource_version AS DECIMAL(65,0))"
			}
			column = clause.Column{Name: cast, Raw: true}
		}
		db = db.Order(clause.OrderByColumn{Column: column, Desc: o.Desc})
	}
	return db.Order(clause.OrderByColumn{Column: clause.Column{Name: "id"}})
}

// jsonValue is a string inside the `object` column: object -> 'a' ->> 'b'
// on PostgreSQL, JSON_UNQUOTE(JSON_EXTRACT(object, '$."a"."b"')) on MySQL
// and MariaDB (NULL where the path is missing).
type jsonValue struct {
	dialect walwatch.Dialect
	path    []string
}

func (v jsonValue) Build(b clause.Builder) {
	if v.dialect == walwatch.Postgres {
		b.WriteQuoted("object")
		for i, key := range v.path {
			if i == len(v.path)-1 {
				b.WriteString(" ->> ")
			} else {
				b.WriteString(" -> ")
			}
			b.AddVar(b, key)
		}
		return
	}
	quoted := make([]string, len(v.path))
	for i, key := range v.path {
		quoted[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
	}
	b.WriteString("JSON_UNQUOTE(JSON_EXTRACT(")
	b.WriteQuoted("object")
	b.WriteString(", ")
	b.AddVar(b, "$."+strings.Join(quoted, "."))
	b.WriteString("))")
}

// jsonCondition is a selector requirement on a jsonValue, with Kubernetes'
// semantics: != and notin also match objects without the key.
type jsonCondition struct {
	value  jsonValue
	op     selection.Operator
	values []string
}

func (c jsonCondition) Build(b clause.Builder) {
	negated := c.op == selection.NotEquals || c.op == selection.NotIn
	if negated {
		b.WriteString("(")
		c.value.Build(b)
		b.WriteString(" IS NULL OR ")
	}
	c.value.Build(b)
	switch c.op {
	case selection.Exists:
		b.WriteString(" IS NOT NULL")
	case selection.DoesNotExist:
		b.WriteString(" IS NULL")
	case selection.Equals, selection.DoubleEquals:
		b.WriteString(" = ")
		b.AddVar(b, c.values[0])
	case selection.NotEquals:
		b.WriteString(" <> ")
		b.AddVar(b, c.values[0])
	case selection.In, selection.NotIn:
		if c.op == selection.In {
			b.WriteString(" IN (")
		} else {
			b.WriteString(" NOT IN (")
		}
		for i, v := range c.values {
			if i > 0 {
				b.WriteString(",")
			}
			b.AddVar(b, v)
		}
		b.WriteString(")")
	default:
		// newQuery refuses every other operator; never select silently.
		b.AddError(fmt.Errorf("walwatch storage: selector operator %q reached SQL", c.op))
	}
	if negated {
		b.WriteString(")")
	}
}
