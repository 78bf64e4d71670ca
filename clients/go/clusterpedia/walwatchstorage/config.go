package walwatchstorage

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	gmysql "gorm.io/driver/mysql"
	gpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// Config is the storage's configuration file. It is Clusterpedia's
// internalstorage configuration (the file --storage-config names, so that the
// APIServer and the clustersynchro-manager can share it), of which this
// storage reads the database keys below, plus a `walwatch` section. Keys it
// does not know (log, metrics, mysql, postgres) are left to internalstorage.
// As for internalstorage, DB_TYPE, DB_DSN, DB_NETWORK, DB_HOST, DB_PORT,
// DB_USER, DB_PASSWORD and DB_DATABASE override the file when set; so do
// WALWATCH_ENDPOINT and WALWATCH_INNER_STORAGE its walwatch section's
// endpoint and inner (a pod can then share Clusterpedia's own file).
type Config struct {
	Type     string `json:"type"` // postgres or mysql
	DSN      string `json:"dsn"`
	Network  string `json:"network"` // tcp (default) or unix
	Host     string `json:"host"`
	Port     string `json:"port"`
	User     string `json:"user"`
	Password string `json:"password"`
	Database string `json:"database"`

	SSLMode      string `json:"sslMode"`
	CertFile     string `json:"sslCertFile"`
	KeyFile      string `json:"sslKeyFile"`
	RootCertFile string `json:"sslRootCertFile"`

	Params   map[string]string `json:"params"`
	ConnPool ConnPoolConfig    `json:"connPool"`

	Walwatch WalwatchConfig `json:"walwatch"`
}

// ConnPoolConfig sizes the storage's own connection pool (its lists, gets
// and held snapshots), as internalstorage's connPool does its.
type ConnPoolConfig struct {
	MaxIdleConns    int             `json:"maxIdleConns"`
	MaxOpenConns    int             `json:"maxOpenConns"`
	ConnMaxLifetime metav1.Duration `json:"connMaxLifetime"`
}

// WalwatchConfig is the `walwatch` section.
type WalwatchConfig struct {
	// Endpoint is walwatch's socket: unix:///run/walwatch/walwatch.sock by
	// default (WALWATCH_ENDPOINT overrides).
	Endpoint string `json:"endpoint"`
	// Table is the table walwatch watches: resources by default.
	Table string `json:"table"`
	// Inner is the name of the storage this one wraps (its --storage-name
	// otherwise, "internal" for internalstorage): the writes, gets,
	// collection resources and cluster bookkeeping go to it, and only lists
	// and watches are this storage's. Empty: no inner storage, and this one
	// serves gets, lists and watches only (the APIServer's verbs).
	// WALWATCH_INNER_STORAGE overrides.
	Inner string `json:"inner"`
	// MaxHeldLists bounds the lists whose snapshot is held between their
	// pages (limit/continue); each holds a database connection. 0 means 16.
	// A paged list past the bound is answered whole, in one page, as
	// Kubernetes lets a server that cannot page do.
	MaxHeldLists int `json:"maxHeldLists"`
	// HeldListIdle is how long a list's snapshot is held after its last page
	// was served; a continue after it is answered 410 Expired (client-go's
	// pager then lists again without pages). 0 means 60s.
	HeldListIdle metav1.Duration `json:"heldListIdle"`
	// HandoffTimeout bounds how long a list waits for walwatch to hand off
	// its snapshot, retries included; then the list is answered 504 (retry).
	// 0 means 20s.
	HandoffTimeout metav1.Duration `json:"handoffTimeout"`
}

// LoadConfig reads the file at path (YAML or JSON) and the environment.
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return nil, fmt.Errorf("walwatch storage: no configuration file (--storage-config)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("walwatch storage: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("walwatch storage: %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses a configuration file's content and applies the
// environment's overrides and the defaults. Unknown keys at the top level
// are internalstorage's and are ignored; an unknown key in the walwatch
// section is an error (a misspelt key would otherwise be a silent default).
func ParseConfig(data []byte) (*Config, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	if jsonData, err = scalarsAsStrings(jsonData); err != nil {
		return nil, err
	}
	var sections struct {
		Walwatch json.RawMessage `json:"walwatch"`
	}
	if err := json.Unmarshal(jsonData, &sections); err != nil {
		return nil, err
	}
	if len(sections.Walwatch) > 0 && string(sections.Walwatch) != "null" {
		strict := json.NewDecoder(bytes.NewReader(sections.Walwatch))
		strict.DisallowUnknownFields()
		if err := strict.Decode(&WalwatchConfig{}); err != nil {
			return nil, fmt.Errorf("walwatch: %w", err)
		}
	}

	cfg := &Config{}
	if err := json.Unmarshal(jsonData, cfg); err != nil {
		return nil, err
	}

	for env, field := range map[string]*string{
		"DB_TYPE": &cfg.Type, "DB_DSN": &cfg.DSN, "DB_NETWORK": &cfg.Network,
		"DB_HOST": &cfg.Host, "DB_PORT": &cfg.Port, "DB_USER": &cfg.User,
		"DB_PASSWORD": &cfg.Password, "DB_DATABASE": &cfg.Database,
		"WALWATCH_ENDPOINT": &cfg.Walwatch.Endpoint, "WALWATCH_INNER_STORAGE": &cfg.Walwatch.Inner,
	} {
		if v, ok := os.LookupEnv(env); ok && v != "" {
			*field = v
		}
	}
	cfg.setDefaults()
	switch cfg.Type {
	case "postgres", "mysql":
	default:
		return nil, fmt.Errorf("type %q: the walwatch storage reads postgres or mysql (MySQL and MariaDB)", cfg.Type)
	}
	if cfg.DSN == "" && cfg.Database == "" {
		return nil, fmt.Errorf("database is required (or dsn)")
	}
	return cfg, nil
}

// stringKeys are the top-level keys whose values are strings, and params'
// values: internalstorage reads its file with YAML v2, which takes
// `port: 5432` or `password: 1234` for a string, so this storage does too.
var stringKeys = []string{"type", "dsn", "network", "host", "port", "user", "password", "database",
	"sslMode", "sslCertFile", "sslKeyFile", "sslRootCertFile"}

// scalarsAsStrings rewrites the numbers and booleans of stringKeys and of
// params as the strings YAML wrote.
func scalarsAsStrings(jsonData []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(jsonData, &top); err != nil {
		return nil, err
	}
	asString := func(raw json.RawMessage) json.RawMessage {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return raw
		}
		switch v.(type) {
		case float64, bool:
			quoted, _ := json.Marshal(string(raw))
			return quoted
		}
		return raw
	}
	for _, key := range stringKeys {
		if raw, ok := top[key]; ok {
			top[key] = asString(raw)
		}
	}
	if raw, ok := top["params"]; ok {
		var params map[string]json.RawMessage
		if json.Unmarshal(raw, &params) == nil {
			for k, v := range params {
				params[k] = asString(v)
			}
			top["params"], _ = json.Marshal(params)
		}
	}
	return json.Marshal(top)
}

// setDefaults gives the walwatch section's unset fields their defaults.
func (c *Config) setDefaults() {
	w := &c.Walwatch
	if w.Endpoint == "" {
		w.Endpoint = walwatch.DefaultEndpoint
	}
	if w.Table == "" {
		w.Table = "resources"
	}
	if w.MaxHeldLists <= 0 {
		w.MaxHeldLists = 16
	}
	if w.HeldListIdle.Duration <= 0 {
		w.HeldListIdle.Duration = time.Minute
	}
	if w.HandoffTimeout.Duration <= 0 {
		w.HandoffTimeout.Duration = 20 * time.Second
	}
}

// Dialect is the walwatch dialect of the configured database.
func (c *Config) Dialect() walwatch.Dialect {
	if c.Type == "mysql" {
		return walwatch.MySQL
	}
	return walwatch.Postgres
}

// OpenDB opens the configured database as gorm, as internalstorage opens
// it (SkipDefaultTransaction: every statement of this storage is a read).
func (c *Config) OpenDB() (*gorm.DB, error) {
	var dialector gorm.Dialector
	switch c.Type {
	case "postgres":
		dsn, err := c.postgresDSN()
		if err != nil {
			return nil, err
		}
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, err
		}
		dialector = gpostgres.New(gpostgres.Config{Conn: db})
	case "mysql":
		mc, err := c.mysqlConfig()
		if err != nil {
			return nil, err
		}
		connector, err := mysql.NewConnector(mc)
		if err != nil {
			return nil, err
		}
		dialector = gmysql.New(gmysql.Config{Conn: sql.OpenDB(connector)})
	}
	db, err := gorm.Open(dialector, &gorm.Config{SkipDefaultTransaction: true, Logger: logger.Discard})
	if err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	maxIdle, maxOpen := c.ConnPool.MaxIdleConns, c.ConnPool.MaxOpenConns
	if maxIdle <= 0 {
		maxIdle = 5
	}
	if maxOpen <= 0 {
		// Room for the held lists and for concurrent lists besides them.
		maxOpen = 40 + c.Walwatch.MaxHeldLists
	}
	sqlDB.SetMaxIdleConns(maxIdle)
	sqlDB.SetMaxOpenConns(maxOpen)
	if d := c.ConnPool.ConnMaxLifetime.Duration; d > 0 {
		sqlDB.SetConnMaxLifetime(d)
	}
	return db, nil
}

// postgresDSN is a libpq-style connection string for pgx.
func (c *Config) postgresDSN() (string, error) {
	if c.DSN != "" {
		if !strings.Contains(c.DSN, "password") && os.Getenv("DB_PASSWORD") != "" {
			return c.DSN + " password='" + quoteLibpq(os.Getenv("DB_PASSWORD")) + "'", nil
		}
		return c.DSN, nil
	}
	kv := map[string]string{
		"host": c.Host, "port": c.Port, "user": c.User, "password": c.Password,
		"dbname": c.Database, "sslmode": c.SSLMode, "sslcert": c.CertFile,
		"sslkey": c.KeyFile, "sslrootcert": c.RootCertFile,
	}
	for k, v := range c.Params {
		kv[k] = v
	}
	keys := make([]string, 0, len(kv))
	for k, v := range kv {
		if v != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s='%s' ", k, quoteLibpq(kv[k]))
	}
	return strings.TrimSpace(b.String()), nil
}

// quoteLibpq escapes a value for a single-quoted libpq keyword value.
func quoteLibpq(v string) string {
	return strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `'`, `\'`)
}

// mysqlConfig is go-sql-driver's configuration, as internalstorage builds it
// (parseTime on).
func (c *Config) mysqlConfig() (*mysql.Config, error) {
	if c.DSN != "" {
		mc, err := mysql.ParseDSN(c.DSN)
		if err != nil {
			return nil, err
		}
		if mc.Passwd == "" {
			mc.Passwd = os.Getenv("DB_PASSWORD")
		}
		mc.ParseTime = true
		return mc, nil
	}
	mc := mysql.NewConfig()
	mc.User = c.User
	mc.Passwd = c.Password
	mc.DBName = c.Database
	mc.Params = c.Params
	mc.ParseTime = true
	if c.Network == "unix" {
		mc.Net = "unix"
		mc.Addr = c.Host
	} else {
		mc.Net = "tcp"
		mc.Addr = net.JoinHostPort(c.Host, c.Port)
	}
	tlsConfig, err := c.mysqlTLS()
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		if err := mysql.RegisterTLSConfig("walwatch-storage", tlsConfig); err != nil {
			return nil, err
		}
		mc.TLSConfig = "walwatch-storage"
	}
	return mc, nil
}

// mysqlTLS is the TLS configuration of sslMode, as internalstorage reads
// it: libpq's modes (disable, allow, prefer, require, verify-ca,
// verify-full) and go-sql-driver's (false, skip-verify). Nil: no TLS.
func (c *Config) mysqlTLS() (*tls.Config, error) {
	t := &tls.Config{}
	switch c.SSLMode {
	case "", "false", "disable":
		return nil, nil
	case "skip-verify", "allow", "prefer":
		t.InsecureSkipVerify = true
		return t, nil
	case "require", "verify-ca":
		// Verify the chain but not the name, as libpq's verify-ca does
		// (require without a root certificate does the same here).
		t.InsecureSkipVerify = true
		t.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return fmt.Errorf("the server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: t.RootCAs, Intermediates: x509.NewCertPool()}
			var leaf *x509.Certificate
			for i, r := range raw {
				cert, err := x509.ParseCertificate(r)
				if err != nil {
					return err
				}
				if i == 0 {
					leaf = cert
				} else {
					opts.Intermediates.AddCert(cert)
				}
			}
			_, err := leaf.Verify(opts)
			return err
		}
	case "verify-full":
		t.ServerName = c.Host
	default:
		return nil, fmt.Errorf("sslMode %q: want disable, allow, prefer, require, verify-ca, verify-full, false or skip-verify", c.SSLMode)
	}
	if c.RootCertFile != "" {
		pem, err := os.ReadFile(c.RootCertFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("sslRootCertFile %s: no certificate in it", c.RootCertFile)
		}
		t.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, fmt.Errorf("sslCertFile and sslKeyFile go together")
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}
