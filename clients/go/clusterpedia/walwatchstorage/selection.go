package walwatchstorage

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	internal "github.com/clusterpedia-io/api/clusterpedia"
)

// clusterAnnotation names an object's member cluster in the stored object
// (Clusterpedia's collector sets it on every object it writes).
const clusterAnnotation = "shadow.clusterpedia.io/cluster-name"

// fuzzyNameLabel is internalstorage's search label for a name substring
// (internalstorage.SearchLabelFuzzyName).
const fuzzyNameLabel = "internalstorage.clusterpedia.io/fuzzy-name"

// whereSQLQueries are internalstorage's raw SQL query parameters
// (AllowRawSQLQuery, AllowParameterizedSQLQuery).
var whereSQLQueries = []string{"whereSQL", "whereSQLStatement", "whereSQLParam", "whereSQLJSONParams"}

// orderColumns are the orderby fields Clusterpedia documents, as columns.
var orderColumns = map[string]bool{
	"cluster": true, "namespace": true, "name": true, "created_at": true, "resource_version": true,
}

// fieldRequirement is one requirement of a field selector: a path into the
// object (metadata.name is ["metadata", "name"]), an operator and values.
type fieldRequirement struct {
	path   []string
	op     selection.Operator
	values []string
}

func (r fieldRequirement) String() string {
	return fmt.Sprintf("%s %s %v", strings.Join(r.path, "."), r.op, r.values)
}

// query is what one request asks of the table: Clusterpedia's ListOptions,
// checked once, for the list's SQL and for the watch's request and filter.
type query struct {
	clusters   []string
	namespaces []string
	names      []string

	since, before *time.Time

	labels     labels.Requirements // the object's labels
	fuzzyNames []string            // name contains each
	fields     []fieldRequirement  // paths into the object
	ownerUID   string
	ownerName  string
	ownerGR    schema.GroupResource
	seniority  int
	orderBy    []internal.OrderBy
	inject     bool // the object's events as an annotation (InjectEvents)
	onlyMeta   bool
	withRemain bool
}

// newQuery checks opts. What is malformed, or not served by this storage in
// any verb, is a 400 here; what one verb cannot serve is refused by it.
func newQuery(opts *internal.ListOptions) (*query, error) {
	q := &query{
		clusters:   dedupe(opts.ClusterNames),
		namespaces: dedupe(opts.Namespaces),
		names:      dedupe(opts.Names),
		ownerUID:   opts.OwnerUID,
		ownerName:  opts.OwnerName,
		ownerGR:    opts.OwnerGroupResource,
		seniority:  opts.OwnerSeniority,
		orderBy:    opts.OrderBy,
		inject:     injectEvents(opts),
		onlyMeta:   opts.OnlyMetadata,
		withRemain: opts.WithRemainingCount != nil && *opts.WithRemainingCount,
	}
	if opts.Since != nil {
		t := opts.Since.Time.UTC()
		q.since = &t
	}
	if opts.Before != nil {
		t := opts.Before.Time.UTC()
		q.before = &t
	}
	if q.seniority < 0 {
		return nil, badRequest("owner seniority %d: must not be negative", q.seniority)
	}
	if (q.ownerUID != "" || q.ownerName != "") && len(q.clusters) != 1 {
		return nil, badRequest("searching by owner uid or name needs exactly one cluster")
	}
	for _, o := range q.orderBy {
		if !orderColumns[o.Field] {
			return nil, badRequest("orderby %q: the walwatch storage orders by cluster, namespace, name, created_at or resource_version", o.Field)
		}
	}
	for _, key := range whereSQLQueries {
		if _, ok := opts.URLQuery[key]; ok {
			return nil, badRequest("%s: the walwatch storage does not run SQL given in a query", strings.Join(whereSQLQueries, ", "))
		}
	}

	if opts.LabelSelector != nil {
		if reqs, selectable := opts.LabelSelector.Requirements(); selectable {
			q.labels = reqs
		}
	}
	if opts.ExtraLabelSelector != nil {
		if reqs, selectable := opts.ExtraLabelSelector.Requirements(); selectable {
			for _, r := range reqs {
				if r.Key() != fuzzyNameLabel || (r.Operator() != selection.Equals && r.Operator() != selection.DoubleEquals && r.Operator() != selection.In) {
					return nil, badRequest("search label %s: not served by the walwatch storage", r.String())
				}
				for _, v := range r.Values().List() {
					if v = strings.TrimSpace(v); v != "" {
						q.fuzzyNames = append(q.fuzzyNames, v)
					}
				}
			}
		}
	}
	if opts.EnhancedFieldSelector != nil {
		if reqs, selectable := opts.EnhancedFieldSelector.Requirements(); selectable {
			for _, r := range reqs {
				fr := fieldRequirement{op: r.Operator(), values: r.Values().List()}
				for _, f := range r.Fields() {
					if f.IsList() {
						return nil, badRequest("field selector %s: list fields are not served", r.String())
					}
					fr.path = append(fr.path, f.Name())
				}
				q.fields = append(q.fields, fr)
			}
		}
	}
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		// Kubernetes' own field selector (a caller other than Clusterpedia's
		// REST layer, which parses fieldSelector into EnhancedFieldSelector).
		for _, r := range opts.FieldSelector.Requirements() {
			fr := fieldRequirement{path: strings.Split(r.Field, "."), values: []string{r.Value}}
			switch r.Operator {
			case selection.Equals, selection.DoubleEquals:
				fr.op = selection.Equals
			case selection.NotEquals:
				fr.op = selection.NotEquals
			default:
				return nil, badRequest("field selector %s: operator not served", r.Field)
			}
			q.fields = append(q.fields, fr)
		}
	}
	for _, f := range q.fields {
		switch f.op {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn, selection.Exists, selection.DoesNotExist:
		default:
			return nil, badRequest("field selector %s: operator %s not served", f, f.op)
		}
	}
	for _, r := range q.labels {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn, selection.Exists, selection.DoesNotExist:
		default:
			// internalstorage skips these silently; a list that ignores a
			// requirement is not exact.
			return nil, badRequest("label selector %s: operator %s is not served by the walwatch storage's lists", r.String(), r.Operator())
		}
	}
	return q, nil
}

// injectEvents reads ListOptions.InjectEvents, which Clusterpedia's api
// module has from v0.9; this storage builds against v0.8.0 (the newest the
// Go module proxy serves), which lacks it, and runs inside Clusterpedia
// builds that have it.
func injectEvents(opts *internal.ListOptions) bool {
	f := reflect.ValueOf(opts).Elem().FieldByName("InjectEvents")
	return f.IsValid() && f.Kind() == reflect.Bool && f.Bool()
}

// watchFields splits the query's field requirements for a watch: those on
// metadata.name and metadata.namespace with =, == or != go to walwatch's
// fieldSelector (server, as terms); in and notin on them are filtered here
// (local: names and namespaces never change, so that is exact); a field
// other than those can change, and neither side can filter it exactly
// (walwatch has no such field): refused.
func (q *query) watchFields() (server []string, local []fieldRequirement, err error) {
	for _, f := range q.fields {
		path := strings.Join(f.path, ".")
		if path != "metadata.name" && path != "metadata.namespace" {
			return nil, nil, badRequest("field selector %s: a watch selects by metadata.name and metadata.namespace only (walwatch's fields)", f)
		}
		switch f.op {
		case selection.Equals, selection.DoubleEquals:
			server = append(server, path+"="+fields.EscapeValue(f.values[0]))
		case selection.NotEquals:
			server = append(server, path+"!="+fields.EscapeValue(f.values[0]))
		case selection.In, selection.NotIn:
			// Names and namespaces never change: filtering here is exact.
			local = append(local, f)
		default:
			return nil, nil, badRequest("field selector %s: not served on a watch", f)
		}
	}
	return server, local, nil
}

func dedupe(in []string) []string {
	if len(in) < 2 {
		return in
	}
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func badRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

// key names the resource and the selection, for telling whether a continue
// token belongs to the list asked for. Paging and resourceVersion options
// are not part of it.
func (q *query) key(gvr schema.GroupVersionResource) string {
	var labelReqs []string
	for _, r := range q.labels {
		labelReqs = append(labelReqs, r.String())
	}
	var fieldReqs []string
	for _, f := range q.fields {
		fieldReqs = append(fieldReqs, f.String())
	}
	data, _ := json.Marshal([]any{
		gvr.String(), q.clusters, q.namespaces, q.names, q.since, q.before,
		labelReqs, q.fuzzyNames, fieldReqs, q.ownerUID, q.ownerName, q.ownerGR.String(),
		q.seniority, q.orderBy, q.inject, q.onlyMeta,
	})
	return string(data)
}
