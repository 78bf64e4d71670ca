package apistorage

import (
	"strconv"
	"strings"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// queries are the store's SQL, in its dialect. Every query names the row by
// its unique key (group, version, resource, cluster, namespace, name), in
// that order, as keyArgs gives it.
type queries struct {
	get, insert, update, record, delete string
	// count and list end with the store's columns; scoped adds the rest,
	// inNamespace or isObject.
	count, list           string
	inNamespace, isObject string
	postgres              bool
}

func newQueries(dialect walwatch.Dialect, table string) queries {
	pg := dialect == walwatch.Postgres
	quote := func(name string) string {
		if pg {
			return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
		}
		return "`" + strings.ReplaceAll(name, "`", "``") + "`"
	}
	t := quote(table)
	store := quote("group") + " = ? AND " + quote("version") + " = ? AND " + quote("resource") + " = ? AND " + quote("cluster") + " = ?"
	row := store + " AND " + quote("namespace") + " = ? AND " + quote("name") + " = ?"
	q := queries{postgres: pg}
	q.get = "SELECT " + quote("resource_version") + ", " + quote("object") + " FROM " + t + " WHERE " + row
	q.insert = "INSERT INTO " + t + " (" + strings.Join([]string{
		quote("group"), quote("version"), quote("resource"), quote("cluster"), quote("namespace"), quote("name"),
		quote("kind"), quote("uid"), quote("resource_version"), quote("object"), quote("created_at"), quote("synced_at"),
	}, ", ") + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	q.update = "UPDATE " + t + " SET " + quote("uid") + " = ?, " + quote("resource_version") + " = ?, " +
		quote("object") + " = ?, " + quote("synced_at") + " = ? WHERE " + row + " AND " + quote("resource_version") + " = ?"
	q.record = "UPDATE " + t + " SET " + quote("resource_version") + " = ? WHERE " + row + " AND " + quote("resource_version") + " = ?"
	q.delete = "DELETE FROM " + t + " WHERE " + row + " AND " + quote("resource_version") + " = ?"
	q.count = "SELECT COUNT(*) FROM " + t + " WHERE " + store
	q.inNamespace = " AND " + quote("namespace") + " = ?"
	q.isObject = q.inNamespace + " AND " + quote("name") + " = ?"
	q.list = "SELECT " + quote("namespace") + ", " + quote("name") + ", " + quote("resource_version") + ", " + quote("object") +
		" FROM " + t + " WHERE " + store
	for _, p := range []*string{&q.get, &q.insert, &q.update, &q.record, &q.delete} {
		*p = q.bind(*p)
	}
	return q
}

// bind numbers the placeholders for PostgreSQL ($1, $2, ...).
func (q queries) bind(query string) string {
	if !q.postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// scoped is query (q.count or q.list) for the rows of sc, bound, with its
// arguments.
func (s *Store) scoped(query string, sc scope) (string, []any) {
	r := s.cfg.Resource
	args := []any{r.Group, r.Version, r.Resource, s.cfg.Cluster}
	switch {
	case sc.single != nil:
		query, args = query+s.q.isObject, append(args, sc.single.namespace, sc.single.name)
	case !sc.all:
		query, args = query+s.q.inNamespace, append(args, sc.namespace)
	}
	return s.q.bind(query), args
}
