package walwatch_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

var pods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// An APIServer's watch of one member cluster's pods, resumed from the last
// resourceVersion it handed out.
func ExampleClient_Watch() {
	client, err := walwatch.NewClient(walwatch.Config{Endpoint: "unix:///run/walwatch/walwatch.sock"})
	if err != nil {
		log.Fatal(err)
	}
	w, err := client.Watch(context.TODO(), walwatch.WatchRequest{
		Resource: pods,
		Cluster:  "member-1",
		Options:  metav1.ListOptions{ResourceVersion: "22381936", AllowWatchBookmarks: true},
	})
	if err != nil {
		// A *apierrors.StatusError: 400/422 for a bad request, 504 while
		// walwatch catches up with the resourceVersion (retry), ...
		log.Fatal(err)
	}
	defer w.Stop()
	for event := range w.ResultChan() {
		switch event.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			pod := event.Object.(*unstructured.Unstructured)
			fmt.Println(event.Type, pod.GetNamespace(), pod.GetName(), pod.GetResourceVersion())
		case watch.Bookmark:
			// Where the client stands: resume from here.
		case watch.Error:
			if apierrors.IsResourceExpired(apierrors.FromObject(event.Object)) {
				// 410: too old; list again, then watch from the list's RV.
			}
		}
	}
}

// An APIServer's list from PostgreSQL, with the resourceVersion a watch
// continues it from.
func ExampleClient_List() {
	client, err := walwatch.NewClient(walwatch.Config{})
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("pgx", "host=db dbname=clusterpedia user=clusterpedia")
	if err != nil {
		log.Fatal(err)
	}
	var objects []string
	rv, err := client.List(context.TODO(), db, walwatch.Postgres, func(ctx context.Context, q walwatch.Queryer) error {
		objects = objects[:0] // reads in one snapshot; start afresh if called again
		rows, err := q.QueryContext(ctx,
			`SELECT object FROM resources WHERE "group" = '' AND version = 'v1' AND resource = 'pods' AND cluster = $1`,
			"member-1")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var object string
			if err := rows.Scan(&object); err != nil {
				return err
			}
			objects = append(objects, object)
		}
		return rows.Err()
	})
	if err != nil {
		log.Fatal(err) // a database error, or walwatch's Status (e.g. 504: retry)
	}
	// The list's metadata.resourceVersion; watch from it.
	fmt.Println(len(objects), "pods at resourceVersion", rv)
}

// The same list on MySQL or MariaDB: the snapshot holds one connection
// (START TRANSACTION WITH CONSISTENT SNAPSHOT), which q reads through.
func ExampleClient_List_mysql() {
	client, err := walwatch.NewClient(walwatch.Config{})
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("mysql", "clusterpedia:password@tcp(db:3306)/clusterpedia?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	var count int
	rv, err := client.List(context.TODO(), db, walwatch.MySQL, func(ctx context.Context, q walwatch.Queryer) error {
		return q.QueryRowContext(ctx,
			"SELECT COUNT(*) FROM resources WHERE `group` = '' AND version = 'v1' AND resource = 'pods'").Scan(&count)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(count, "pods at resourceVersion", rv)
}

// Pages of one list, each read in the same snapshot: BeginSnapshot, then
// every page through the snapshot's Queryer, then Close.
func ExampleClient_BeginSnapshot() {
	client, err := walwatch.NewClient(walwatch.Config{})
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("pgx", "host=db dbname=clusterpedia user=clusterpedia")
	if err != nil {
		log.Fatal(err)
	}
	snapshot, err := client.BeginSnapshot(context.TODO(), db, walwatch.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	defer snapshot.Close()
	for offset := 0; ; offset += 500 {
		var n int
		err := snapshot.Queryer().QueryRowContext(context.TODO(),
			`SELECT COUNT(*) FROM (SELECT id FROM resources ORDER BY id LIMIT 500 OFFSET $1) page`, offset).Scan(&n)
		if err != nil {
			log.Fatal(err)
		}
		if n < 500 {
			break
		}
	}
	fmt.Println("every page is the table at resourceVersion", snapshot.ResourceVersion())
}

// A "most recent" watch without a list.
func ExampleClient_FreshRV() {
	client, err := walwatch.NewClient(walwatch.Config{})
	if err != nil {
		log.Fatal(err)
	}
	rv, err := client.FreshRV(context.TODO())
	if err != nil {
		log.Fatal(err)
	}
	w, err := client.Watch(context.TODO(), walwatch.WatchRequest{Resource: pods, Options: metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		log.Fatal(err)
	}
	w.Stop()
}

// A client-go informer whose watches come from walwatch: its reflector
// lists (ListFunc: an APIServer's own SQL list, e.g. Client.List) and
// watches from the list's resourceVersion, or, with client-go's
// WatchListClient, starts with one WatchList watch that walwatch serves.
func ExampleClient_Watch_informer() {
	client, err := walwatch.NewClient(walwatch.Config{})
	if err != nil {
		log.Fatal(err)
	}
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			return listPodsFromSQL(opts) // the APIServer's list, with its exact RV
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(context.TODO(), walwatch.WatchRequest{Resource: pods, Cluster: "member-1", Options: opts})
		},
	}
	pod := &unstructured.Unstructured{}
	pod.SetAPIVersion("v1")
	pod.SetKind("Pod")
	informer := cache.NewSharedIndexInformer(lw, pod, 0, cache.Indexers{})
	stop := make(chan struct{})
	defer close(stop)
	go informer.Run(stop)
	cache.WaitForCacheSync(stop, informer.HasSynced)
}

func listPodsFromSQL(metav1.ListOptions) (runtime.Object, error) {
	return &unstructured.UnstructuredList{}, nil
}
