package walwatchstorage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/clusterpedia-io/clusterpedia/pkg/storage"
)

// ResourceStorage is the storage of one resource: Clusterpedia's
// storage.ResourceStorage. Lists and watches are its own; the rest is the
// inner storage's when there is one.
type ResourceStorage struct {
	factory *StorageFactory
	config  storage.ResourceStorageConfig
	inner   storage.ResourceStorage // nil: standalone
}

var _ storage.ResourceStorage = &ResourceStorage{}

// GetStorageConfig is a copy of the resource's configuration.
func (s *ResourceStorage) GetStorageConfig() *storage.ResourceStorageConfig {
	config := s.config
	return &config
}

func (s *ResourceStorage) groupResource() schema.GroupResource {
	if !s.config.GroupResource.Empty() {
		return s.config.GroupResource
	}
	return s.config.StorageResource.GroupResource()
}

// Get reads one object: the inner storage's Get, or standalone the row of
// (cluster, namespace, name) decoded with the resource's codec. Its
// metadata.resourceVersion is the member cluster's, as internalstorage's.
func (s *ResourceStorage) Get(ctx context.Context, cluster, namespace, name string, into runtime.Object) error {
	if s.inner != nil {
		return s.inner.Get(ctx, cluster, namespace, name, into)
	}
	table := s.factory.config.Walwatch.Table
	var object []byte
	db := where(s.factory.db.WithContext(ctx).Table(table), s.factory.dialect, table, s.config.StorageResource, &query{
		clusters: []string{cluster}, namespaces: []string{namespace}, names: []string{name},
	})
	err := db.Select("object").Limit(1).Row().Scan(&object)
	if errors.Is(err, sql.ErrNoRows) {
		return apierrors.NewNotFound(s.groupResource(), name)
	}
	if err != nil {
		return s.dbError(err)
	}
	obj, _, err := s.config.Codec.Decode(object, nil, into)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("decoding a stored %s: %w", s.groupResource(), err))
	}
	if obj != into {
		return apierrors.NewInternalError(fmt.Errorf("decoding a stored %s gave a %T, not the %T asked for", s.groupResource(), obj, into))
	}
	return nil
}

// Create is the inner storage's; standalone, not supported.
func (s *ResourceStorage) Create(ctx context.Context, cluster string, obj runtime.Object) error {
	if s.inner != nil {
		return s.inner.Create(ctx, cluster, obj)
	}
	return s.factory.notSupported("create")
}

// Update is the inner storage's; standalone, not supported.
func (s *ResourceStorage) Update(ctx context.Context, cluster string, obj runtime.Object) error {
	if s.inner != nil {
		return s.inner.Update(ctx, cluster, obj)
	}
	return s.factory.notSupported("update")
}

// Delete is the inner storage's; standalone, not supported.
func (s *ResourceStorage) Delete(ctx context.Context, cluster string, obj runtime.Object) error {
	if s.inner != nil {
		return s.inner.Delete(ctx, cluster, obj)
	}
	return s.factory.notSupported("delete")
}

// ConvertDeletedObject is the inner storage's; standalone, the object of an
// informer's delete (a DeletedFinalStateUnknown's last state included).
func (s *ResourceStorage) ConvertDeletedObject(obj interface{}) (runtime.Object, error) {
	if s.inner != nil {
		return s.inner.ConvertDeletedObject(obj)
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(runtime.Object); ok {
		return o, nil
	}
	return nil, fmt.Errorf("walwatch storage: a deleted %T is not a runtime.Object", obj)
}

// RecordEvent is the inner storage's; standalone, not supported.
func (s *ResourceStorage) RecordEvent(ctx context.Context, cluster string, event *corev1.Event) error {
	if s.inner != nil {
		return s.inner.RecordEvent(ctx, cluster, event)
	}
	return s.factory.notSupported("recording events")
}

// dbError is a database error as the Status Clusterpedia's REST layer
// passes to the client: a 500 naming the resource.
func (s *ResourceStorage) dbError(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return apierrors.NewTimeoutError(fmt.Sprintf("reading %s: %v", s.groupResource(), err), 1)
	}
	return apierrors.NewInternalError(fmt.Errorf("reading %s from the database: %w", s.groupResource(), err))
}
