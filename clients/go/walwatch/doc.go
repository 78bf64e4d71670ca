// Package walwatch is the Go client of walwatch, the sidecar that serves the
// row changes of one SQL table (Clusterpedia's `resources`, on PostgreSQL,
// MySQL or MariaDB) as Kubernetes watch streams, over a Unix socket, in the
// Kubernetes watch wire protocol. It is for the authors of an APIServer whose
// lists come from that table: they list from SQL and watch through walwatch.
//
// The protocol itself (paths, parameters, the resourceVersion rules, every
// answer) is watchserver/PROTOCOL.md in walwatch's repository. This package
// speaks it as client-go speaks the apiserver's:
//
//   - Client.Watch opens a watch and returns apimachinery's watch.Interface:
//     objects as *unstructured.Unstructured or through the caller's decoder,
//     errors as *apierrors.StatusError (apierrors.IsResourceExpired,
//     IsTimeout, and HasStatusCause with metav1.CauseTypeResourceVersionTooLarge
//     classify them), the stream's ERROR event as a watch.Error carrying a
//     *metav1.Status, bookmarks as they come (the WatchList end's
//     "k8s.io/initial-events-end" annotation included);
//   - Client.List and Client.BeginSnapshot read the APIServer's own list in a
//     snapshot of the database and return the snapshot's exact
//     resourceVersion (walwatch's handoff): a watch from it continues the
//     list without losing or repeating a change. They follow the protocol's
//     retry rules (a new snapshot after 409 and 410, the same one again after
//     a 504). Package walwatchgorm does the same for gorm;
//   - Client.FreshRV gives a resourceVersion no older than any commit before
//     the call, for a "most recent" watch without a list.
//
// A Client is safe for concurrent use; make one per walwatch and keep it.
package walwatch
