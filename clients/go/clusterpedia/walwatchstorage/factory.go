// Package walwatchstorage is a Clusterpedia storage layer whose lists carry
// exact resourceVersions and whose watches come from walwatch, the sidecar
// that turns the `resources` table's changes into Kubernetes watch events.
//
// It reads the table Clusterpedia's internalstorage writes (PostgreSQL, or
// MySQL/MariaDB), with internalstorage's configuration file, and gives
// Clusterpedia's APIServer:
//   - list: every Clusterpedia query option served in SQL as internalstorage
//     serves it, read in a snapshot whose exact RV walwatch names (the list's
//     metadata.resourceVersion); limit and continue page through one
//     snapshot, held between pages;
//   - watch and WatchList: from walwatch, continuing any list exactly;
//   - get.
//
// With `walwatch.inner` set (internalstorage's name, "internal"), everything
// else (writes, collection resources, cluster bookkeeping) goes to that
// storage, so that one configuration serves the APIServer and the
// clustersynchro-manager alike. See clients/go/README.md for how to load it
// into Clusterpedia (a storage plugin, or a package built in).
package walwatchstorage

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gorm.io/gorm"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	internal "github.com/clusterpedia-io/api/clusterpedia"
	"github.com/clusterpedia-io/clusterpedia/pkg/storage"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// StorageName is the name this storage registers under (--storage-name).
const StorageName = "walwatch"

// Register registers NewStorageFactory under StorageName with Clusterpedia's
// storage registry. A storage plugin's init calls it (main.go at this module's root); so does
// a Clusterpedia build that imports this package.
func Register() {
	storage.RegisterStorageFactoryFunc(StorageName, NewStorageFactory)
}

// StorageFactory is Clusterpedia's storage.StorageFactory over the table and
// walwatch. It is safe for concurrent use.
type StorageFactory struct {
	config  *Config
	db      *gorm.DB
	client  *walwatch.Client
	inner   storage.StorageFactory // nil: standalone
	dialect walwatch.Dialect
	lists   *heldLists

	shutdownOnce sync.Once
}

var _ storage.StorageFactory = &StorageFactory{}

// NewStorageFactory reads the configuration file at configPath (see Config),
// opens the database and, with walwatch.inner set, the inner storage from
// Clusterpedia's registry with the same file.
func NewStorageFactory(configPath string) (storage.StorageFactory, error) {
	cfg, err := LoadConfig(configPath)
	if err != nil {
		return nil, err
	}
	var inner storage.StorageFactory
	if cfg.Walwatch.Inner != "" {
		if cfg.Walwatch.Inner == StorageName {
			return nil, fmt.Errorf("walwatch storage: walwatch.inner cannot be %q itself", StorageName)
		}
		if inner, err = storage.NewStorageFactory(cfg.Walwatch.Inner, configPath); err != nil {
			return nil, fmt.Errorf("walwatch storage: the inner storage %q: %w", cfg.Walwatch.Inner, err)
		}
	}
	return New(cfg, inner)
}

// New is NewStorageFactory with the configuration and the inner storage (nil
// for none) given.
func New(cfg *Config, inner storage.StorageFactory) (*StorageFactory, error) {
	copied := *cfg
	cfg = &copied
	cfg.setDefaults() // a Config made in code, not by ParseConfig
	db, err := cfg.OpenDB()
	if err != nil {
		return nil, fmt.Errorf("walwatch storage: opening the %s database: %w", cfg.Type, err)
	}
	client, err := walwatch.NewClient(walwatch.Config{Endpoint: cfg.Walwatch.Endpoint, Table: cfg.Walwatch.Table})
	if err != nil {
		return nil, err
	}
	return &StorageFactory{
		config:  cfg,
		db:      db,
		client:  client,
		inner:   inner,
		dialect: cfg.Dialect(),
		lists:   newHeldLists(cfg.Walwatch.MaxHeldLists, cfg.Walwatch.HeldListIdle.Duration),
	}, nil
}

// GetSupportedRequestVerbs is the inner storage's verbs with watch, or get,
// list and watch.
func (f *StorageFactory) GetSupportedRequestVerbs() []string {
	verbs := []string{"get", "list", "watch"}
	if f.inner != nil {
		verbs = nil
		for _, v := range f.inner.GetSupportedRequestVerbs() {
			if v != "watch" {
				verbs = append(verbs, v)
			}
		}
		verbs = append(verbs, "watch")
	}
	return verbs
}

// NewResourceStorage is the storage of one resource: lists and watches here,
// the rest in the inner storage's ResourceStorage.
func (f *StorageFactory) NewResourceStorage(config *storage.ResourceStorageConfig) (storage.ResourceStorage, error) {
	if config == nil || config.StorageResource.Resource == "" || config.Codec == nil {
		return nil, errors.New("walwatch storage: a resource storage needs its StorageResource and Codec")
	}
	s := &ResourceStorage{factory: f, config: *config}
	if f.inner != nil {
		inner, err := f.inner.NewResourceStorage(config)
		if err != nil {
			return nil, err
		}
		s.inner = inner
	}
	return s, nil
}

// PrepareCluster is the inner storage's; standalone, nothing.
func (f *StorageFactory) PrepareCluster(cluster string) error {
	if f.inner != nil {
		return f.inner.PrepareCluster(cluster)
	}
	return nil
}

// GetResourceVersions is the inner storage's (the clustersynchro-manager's
// bookkeeping); standalone, not supported.
func (f *StorageFactory) GetResourceVersions(ctx context.Context, cluster string) (map[schema.GroupVersionResource]storage.ClusterResourceVersions, error) {
	if f.inner != nil {
		return f.inner.GetResourceVersions(ctx, cluster)
	}
	return nil, f.notSupported("the clusters' resource versions")
}

// GetCollectionResources is the inner storage's; standalone, none.
func (f *StorageFactory) GetCollectionResources(ctx context.Context) ([]*internal.CollectionResource, error) {
	if f.inner != nil {
		return f.inner.GetCollectionResources(ctx)
	}
	return nil, nil
}

// NewCollectionResourceStorage is the inner storage's; standalone, not
// supported.
func (f *StorageFactory) NewCollectionResourceStorage(cr *internal.CollectionResource) (storage.CollectionResourceStorage, error) {
	if f.inner != nil {
		return f.inner.NewCollectionResourceStorage(cr)
	}
	return nil, f.notSupported("collection resources")
}

// CleanCluster is the inner storage's; standalone, not supported (the
// standalone storage never writes).
func (f *StorageFactory) CleanCluster(ctx context.Context, cluster string) error {
	if f.inner != nil {
		return f.inner.CleanCluster(ctx, cluster)
	}
	return f.notSupported("cleaning a cluster")
}

// CleanClusterResource is the inner storage's; standalone, not supported.
func (f *StorageFactory) CleanClusterResource(ctx context.Context, cluster string, gvr schema.GroupVersionResource) error {
	if f.inner != nil {
		return f.inner.CleanClusterResource(ctx, cluster, gvr)
	}
	return f.notSupported("cleaning a cluster's resource")
}

// Shutdown ends the held lists' snapshots, closes the database, and shuts
// the inner storage down.
func (f *StorageFactory) Shutdown() error {
	var err error
	f.shutdownOnce.Do(func() {
		f.lists.closeAll()
		if sqlDB, e := f.db.DB(); e == nil {
			err = sqlDB.Close()
		}
		if f.inner != nil {
			if e := f.inner.Shutdown(); e != nil && err == nil {
				err = e
			}
		}
	})
	return err
}

func (f *StorageFactory) notSupported(what string) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "walwatch storage"},
		fmt.Sprintf("%s (standalone: set walwatch.inner to %q to serve it through internalstorage)", what, "internal"))
}
