// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
)

func TestRedactDSN(t *testing.T) {
	tests := []struct {
		dsn  string
		want string
	}{
		{"postgres://collector:s3cr3t@db.example.com:6432/stats?sslmode=require", "host=db.example.com port=6432 dbname=stats user=collector"},
		{"host=db port=5433 user=u password=s3cr3t dbname=d sslmode=disable", "host=db port=5433 dbname=d user=u"},
		{"host=db user=u password='s3 cr3t' dbname=d", "host=db port=5432 dbname=d user=u"},
		{"postgres://u@db/d?password=s3cr3t", "host=db port=5432 dbname=d user=u"},
		{"host=a,b port=5432,5433 user=u password=s3cr3t dbname=d", "host=a,b port=5432,5433 dbname=d user=u"},
		{"host=/run/postgresql user=u dbname=d", "host=/run/postgresql port=5432 dbname=d user=u"},
		{"postgres://u:s3cr3t@db:notaport/d", "(unparseable dsn)"},
		{"host=db password='unterminated s3cr3t", "(unparseable dsn)"},
	}
	for _, tt := range tests {
		got := redactDSN(tt.dsn)
		if got != tt.want {
			t.Errorf("redactDSN(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
		if strings.Contains(got, "s3cr3t") || strings.Contains(got, "cr3t") {
			t.Errorf("redactDSN(%q) shows the password: %q", tt.dsn, got)
		}
	}
}

// Configuration errors about the DSN name the problem, never the password,
// even for connection strings too broken to parse.
func TestDSNErrorsHidePasswords(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:s3cr3t@db:notaport/d",
		"postgres://u:s3cr3t@db:5432/d?sslmode=bogus",
		"host=db password=s3cr3t port=notaport",
		"host=db password='s3cr3t' port=notaport",
		"host=db port=5432 password=s3cr3t sslmode=bogus",
		"postgres://u:s3cr3t%zz@db/d",
		"postgres://u:s3cr3t@db/d?password=other%zzsecret",
	} {
		cfg := DefaultConfig()
		cfg.DSN = configopaque.String(dsn)
		err := cfg.Validate()
		if err == nil {
			t.Errorf("Validate accepted %q", dsn)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "othersecret") || !strings.Contains(msg, "dsn") {
			t.Errorf("Validate(%q) = %q: shows the password or does not name the key", dsn, msg)
		}
		if _, err := Open(context.Background(), cfg); err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Open(%q) = %v", dsn, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		key    string // "" for valid
		says   string // a fragment of the message
	}{
		{"defaults", func(*Config) {}, "", ""},
		{"keep forever", func(c *Config) { c.Retention = 0 }, "", ""},
		{"no audit limit", func(c *Config) { c.AuditPerServicePerMinute = 0 }, "", ""},
		{"five-minute buckets", func(c *Config) { c.Bucket = 5 * time.Minute }, "", ""},
		{"no pending rows", func(c *Config) { c.MaxPendingRows = 0 }, "max_pending_rows", ""},
		{"negative retention", func(c *Config) { c.Retention = -time.Hour }, "retention", ""},
		{"retention under a day", func(c *Config) { c.Retention = time.Hour }, "retention", ""},
		{"tiny bucket", func(c *Config) { c.Bucket = time.Millisecond }, "bucket", ""},
		{"bucket not dividing a day", func(c *Config) { c.Bucket = 7 * time.Minute }, "bucket", ""},
		{"bucket over an hour", func(c *Config) { c.Bucket = 2 * time.Hour }, "bucket", ""},
		{"negative audit limit", func(c *Config) { c.AuditPerServicePerMinute = -1 }, "audit_per_service_per_minute", ""},
		{"model read back too often", func(c *Config) { c.ModelRefresh = 5 * time.Millisecond }, "model_refresh", "5ms must be at least 1s, such as 10s"},
		{"no write timeout", func(c *Config) { c.WriteTimeout = 0 }, "write_timeout", "must be positive, such as 1m"},
		{"bad dsn", func(c *Config) { c.DSN = "port=notaport" }, "dsn", ""},
		{"shutdown timeout of a second", func(c *Config) { c.ShutdownTimeout = time.Second }, "", ""},
		// A bare number is read as nanoseconds: every duration key says so.
		{"bare retention", func(c *Config) { c.Retention = 720 }, "retention",
			"720ns is shorter than the daily partitions; use at least 24h, or 0 to keep everything; a bare number is read as nanoseconds; write a unit, such as 720h"},
		{"bare bucket", func(c *Config) { c.Bucket = 60 }, "bucket",
			"60ns must be at least 1s; a bare number is read as nanoseconds; write a unit, such as 1m"},
		{"bare model refresh", func(c *Config) { c.ModelRefresh = 10 }, "model_refresh",
			"10ns must be at least 1s; a bare number is read as nanoseconds; write a unit, such as 10s"},
		{"bare write timeout", func(c *Config) { c.WriteTimeout = 60 }, "write_timeout",
			"60ns must be at least 1s; a bare number is read as nanoseconds; write a unit, such as 1m"},
		{"write timeout under a second", func(c *Config) { c.WriteTimeout = 10 * time.Millisecond }, "write_timeout", "10ms must be at least 1s, such as 1m"},
		{"no shutdown timeout", func(c *Config) { c.ShutdownTimeout = 0 }, "shutdown_timeout", "0s must be positive, such as 5s"},
		{"bare shutdown timeout", func(c *Config) { c.ShutdownTimeout = 5 }, "shutdown_timeout",
			"5ns must be at least 100ms; a bare number is read as nanoseconds; write a unit, such as 5s"},
		{"shutdown timeout too short", func(c *Config) { c.ShutdownTimeout = 10 * time.Millisecond }, "shutdown_timeout", "10ms must be at least 100ms, such as 5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.key == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.key != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error about %s", tt.key)
			case tt.key != "" && !strings.HasPrefix(err.Error(), tt.key+":"):
				t.Fatalf("Validate() = %q, want it to name %s", err, tt.key)
			case !strings.Contains(fmt.Sprint(err), tt.says):
				t.Fatalf("Validate() = %q, want it to say %q", err, tt.says)
			}
		})
	}
}

// The store's description names the database, not the password.
func TestStoreStringHidesPassword(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DSN = "postgres://collector:s3cr3t@db.example.com:6432/stats"
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.String(); got != "host=db.example.com port=6432 dbname=stats user=collector" {
		t.Fatalf("String() = %q", got)
	}
}
