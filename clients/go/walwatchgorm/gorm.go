// Package walwatchgorm reads lists through gorm inside walwatch's snapshots,
// for APIServers whose storage is gorm (Clusterpedia's internalstorage is).
//
// A *gorm.DB from Snapshot.DB, or the one List passes, runs its statements in
// the snapshot's transaction: gorm's ConnPool is the snapshot's Queryer, as
// gorm's own Begin sets it for a transaction.
package walwatchgorm

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// DialectOf names the database db reads: gorm's postgres driver is
// walwatch.Postgres, its mysql driver (MySQL and MariaDB) walwatch.MySQL.
func DialectOf(db *gorm.DB) (walwatch.Dialect, error) {
	switch name := db.Dialector.Name(); name {
	case "postgres":
		return walwatch.Postgres, nil
	case "mysql":
		return walwatch.MySQL, nil
	default:
		return "", fmt.Errorf("walwatchgorm: gorm dialect %q: walwatch reads PostgreSQL (postgres) and MySQL/MariaDB (mysql)", name)
	}
}

// Snapshot is a walwatch.Snapshot with a gorm handle on it.
type Snapshot struct {
	*walwatch.Snapshot
	db *gorm.DB
}

// DB is a *gorm.DB whose statements run in the snapshot, with ctx. It keeps
// db's configuration (logger, plugins, naming) but none of its conditions.
func (s *Snapshot) DB(ctx context.Context) *gorm.DB {
	tx := s.db.Session(&gorm.Session{NewDB: true, Context: ctx, SkipDefaultTransaction: true})
	tx.Statement.ConnPool = s.Queryer()
	return tx
}

// BeginSnapshot is walwatch.Client.BeginSnapshot on gorm's connection pool.
func BeginSnapshot(ctx context.Context, c *walwatch.Client, db *gorm.DB) (*Snapshot, error) {
	dialect, err := DialectOf(db)
	if err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("walwatchgorm: gorm's connection pool: %w", err)
	}
	s, err := c.BeginSnapshot(ctx, sqlDB, dialect)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Snapshot: s, db: db}, nil
}

// List is walwatch.Client.List through gorm: list reads with tx, a *gorm.DB
// in the snapshot, and List returns the snapshot's exact RV.
func List(ctx context.Context, c *walwatch.Client, db *gorm.DB, list func(tx *gorm.DB) error) (string, error) {
	s, err := BeginSnapshot(ctx, c, db)
	if err != nil {
		return "", err
	}
	defer s.Close()
	if err := list(s.DB(ctx)); err != nil {
		return "", err
	}
	if err := s.Close(); err != nil {
		return "", fmt.Errorf("walwatchgorm: ending the list's snapshot: %w", err)
	}
	return s.ResourceVersion(), nil
}
