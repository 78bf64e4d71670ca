package walwatchstorage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walwatch/walwatch/clients/go/clusterpedia/walwatchstorage"
)

// Clusterpedia's own ConfigMap (deploy/internalstorage/postgres) writes the
// port as a YAML number, and internalstorage reads it: so must this storage.
func TestConfigReadsInternalstoragesFile(t *testing.T) {
	t.Setenv("DB_PASSWORD", "from-the-secret")
	cfg, err := walwatchstorage.ParseConfig([]byte(`
type: "postgres"
host: "clusterpedia-internalstorage-postgres"
port: 5432
user: postgres
database: "clusterpedia"
params:
  connect_timeout: 10
log:
  stdout: true
  level: "Info"
metrics:
  disable: true
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != "5432" || cfg.Password != "from-the-secret" || cfg.Params["connect_timeout"] != "10" {
		t.Errorf("port %q, password %q, params %v", cfg.Port, cfg.Password, cfg.Params)
	}
	if cfg.Walwatch.Endpoint != "unix:///run/walwatch/walwatch.sock" || cfg.Walwatch.Table != "resources" ||
		cfg.Walwatch.MaxHeldLists != 16 || cfg.Walwatch.HeldListIdle.Duration != time.Minute || cfg.Walwatch.Inner != "" {
		t.Errorf("defaults: %+v", cfg.Walwatch)
	}
}

func TestConfigWalwatchSection(t *testing.T) {
	t.Setenv("WALWATCH_ENDPOINT", "unix:///var/run/ww.sock")
	t.Setenv("WALWATCH_INNER_STORAGE", "internal")
	cfg, err := walwatchstorage.ParseConfig([]byte(`
type: mysql
dsn: "clusterpedia@tcp(db:3306)/clusterpedia"
walwatch:
  endpoint: unix:///ignored.sock
  inner: ignored
  maxHeldLists: 4
  heldListIdle: 5s
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Walwatch.Endpoint != "unix:///var/run/ww.sock" || cfg.Walwatch.Inner != "internal" ||
		cfg.Walwatch.MaxHeldLists != 4 || cfg.Walwatch.HeldListIdle.Duration != 5*time.Second {
		t.Errorf("%+v", cfg.Walwatch)
	}
}

func TestConfigRefusals(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"type: sqlite3\ndsn: x", `type "sqlite3"`},
		{"type: postgres\nhost: db", "database is required"},
		{"type: postgres\ndatabase: c\nwalwatch:\n  endpont: unix:///x.sock", `unknown field "endpont"`},
		{"type: postgres\ndatabase: c\nwalwatch:\n  heldListIdle: soon", "walwatch"},
		{"type: [postgres", "yaml"},
	} {
		_, err := walwatchstorage.ParseConfig([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming %q", tc.file, err, tc.want)
		}
	}
}
