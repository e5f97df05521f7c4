// SPDX-License-Identifier: Apache-2.0

package store

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/errorownership/errorownership/internal/configcheck"
)

// Config configures the store. The errorownership_store extension embeds
// it, so its field tags are collector configuration keys.
type Config struct {
	// DSN is the PostgreSQL connection string, as a URL
	// (postgres://user@host:5432/db) or keyword/value pairs. Empty uses the
	// standard PG* environment variables (PGHOST, PGUSER …), as libpq does;
	// a password is best given by PGPASSWORD or ~/.pgpass, not in the file.
	// One written here is masked wherever the collector shows its
	// configuration.
	DSN configopaque.String `mapstructure:"dsn"`
	// MaxPendingRows bounds the rows held for writing (queued, or being
	// written) while the database is slow or down; past it the oldest
	// flushes are dropped and counted.
	MaxPendingRows int `mapstructure:"max_pending_rows"`
	// Retention is how long statistics and audit entries are kept; older
	// daily partitions are dropped every hour. Zero keeps everything.
	Retention time.Duration `mapstructure:"retention"`
	// Bucket is the width of the time buckets flushes are summed into. It
	// must divide a day, so that no bucket straddles two daily partitions.
	Bucket time.Duration `mapstructure:"bucket"`
	// AuditPerServicePerMinute bounds the coincidental-error audit entries
	// a collector keeps per service and minute of its flush interval (a
	// 30 s flush keeps at most this many per service, a 2 m one twice as
	// many), so that a service failing coincidentally on every request
	// cannot flood the audit log or the collector's memory; the rest are
	// counted. Zero means no limit.
	AuditPerServicePerMinute int `mapstructure:"audit_per_service_per_minute"`
	// ModelRefresh is how often a collector reads the edge model merged in
	// the store back, for its verdicts and its hints. (How fast old buckets
	// fade in it is edge_model.half_life, the same as for the model a
	// collector learns without a store.)
	ModelRefresh time.Duration `mapstructure:"model_refresh"`
	// WriteTimeout bounds one attempt at writing a flush, so that a database
	// that stopped answering cannot hold the writer forever.
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
	// ShutdownTimeout bounds how long Writer.Shutdown keeps writing what is
	// queued, the last flush included: the collector's own shutdown has no
	// deadline, and a database that is down or refuses every write must not
	// keep the collector from stopping. What is left then is dropped,
	// counted and logged.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
}

// Minimums of the duration keys: below them a value is a mistake, most
// often a bare number, which the collector reads as nanoseconds.
const (
	minBucket          = time.Second
	minModelRefresh    = time.Second
	minWriteTimeout    = time.Second
	minShutdownTimeout = 100 * time.Millisecond
)

// DefaultConfig returns the defaults: PG* environment variables, 1,000,000
// pending rows, 30 days' retention, one-minute buckets, 100 audit entries per
// service per minute, the model read back every 10 seconds, a 1-minute
// write timeout and a 5-second shutdown timeout.
func DefaultConfig() Config {
	return Config{
		MaxPendingRows:           1_000_000,
		Retention:                30 * 24 * time.Hour,
		Bucket:                   time.Minute,
		AuditPerServicePerMinute: 100,
		ModelRefresh:             10 * time.Second,
		WriteTimeout:             time.Minute,
		ShutdownTimeout:          5 * time.Second,
	}
}

// Validate reports every problem in the configuration, each naming its key
// and the fix. Errors never include a password.
func (c *Config) Validate() error {
	var errs []error
	if err := CheckDSN("dsn", c.DSN); err != nil {
		errs = append(errs, err)
	}
	if c.MaxPendingRows < 1 {
		errs = append(errs, fmt.Errorf("max_pending_rows: %d must be at least 1, such as 1000000", c.MaxPendingRows))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention: %v must not be negative; use 0 to keep everything", c.Retention))
	} else if c.Retention > 0 && c.Retention < 24*time.Hour {
		errs = append(errs, fmt.Errorf("retention: %v is shorter than the daily partitions; use at least 24h, or 0 to keep everything%s", c.Retention, configcheck.BareNumber(c.Retention, "720h")))
	}
	switch {
	case c.Bucket < minBucket:
		errs = append(errs, configcheck.TooShort("bucket", c.Bucket, minBucket, "1m"))
	case c.Bucket > time.Hour || (24*time.Hour)%c.Bucket != 0:
		errs = append(errs, fmt.Errorf("bucket: %v must divide a day and be at most 1h, such as 1m or 5m", c.Bucket))
	}
	if c.AuditPerServicePerMinute < 0 {
		errs = append(errs, fmt.Errorf("audit_per_service_per_minute: %d must not be negative; use 0 for no limit", c.AuditPerServicePerMinute))
	}
	if c.ModelRefresh < minModelRefresh {
		errs = append(errs, configcheck.TooShort("model_refresh", c.ModelRefresh, minModelRefresh, "10s"))
	}
	if c.WriteTimeout < minWriteTimeout {
		errs = append(errs, configcheck.TooShort("write_timeout", c.WriteTimeout, minWriteTimeout, "1m"))
	}
	if c.ShutdownTimeout < minShutdownTimeout {
		errs = append(errs, configcheck.TooShort("shutdown_timeout", c.ShutdownTimeout, minShutdownTimeout, "5s"))
	}
	return errors.Join(errs...)
}

// CheckDSN reports whether dsn can be parsed, naming it key in the error,
// which never shows a password.
func CheckDSN(key string, dsn configopaque.String) error {
	if _, err := pgconn.ParseConfig(string(dsn)); err != nil {
		return fmt.Errorf("%s: %s cannot be parsed (%s); use postgres://user@host:5432/dbname or host=... dbname=... pairs", key, redactDSN(string(dsn)), parseProblem(string(dsn), err))
	}
	return nil
}

// redactDSN describes a connection string by its host, port, database and
// user only, so that it can appear in logs and errors: passwords and other
// parameters never do.
func redactDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(unparseable dsn)"
	}
	// Several hosts come as fallbacks, repeated once per TLS mode tried;
	// list each host and port once, libpq style.
	type hostPort struct {
		host string
		port uint16
	}
	seen := map[hostPort]bool{{cfg.Host, cfg.Port}: true}
	hosts, ports := []string{cfg.Host}, []string{strconv.Itoa(int(cfg.Port))}
	for _, fb := range cfg.Fallbacks {
		if hp := (hostPort{fb.Host, fb.Port}); !seen[hp] {
			seen[hp] = true
			hosts, ports = append(hosts, fb.Host), append(ports, strconv.Itoa(int(fb.Port)))
		}
	}
	return fmt.Sprintf("host=%s port=%s dbname=%s user=%s", strings.Join(hosts, ","), strings.Join(ports, ","), cfg.Database, cfg.User)
}

// secretPatterns find what may be a password in a connection string:
// password=... (quoted or not) and the password of URL user information.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`password\s*=\s*'(?:[^'\\]|\\.)*'`),
	regexp.MustCompile(`password\s*=\s*[^\s']+`),
	regexp.MustCompile(`[?&]password=[^&#\s]*`),
}

// parseProblem says why dsn could not be parsed without repeating the
// connection string: the parse error's own text may quote all of it.
func parseProblem(dsn string, err error) string {
	// The innermost cause names the problem ("invalid port"); the wrappers
	// add the connection string.
	for {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
			continue
		}
		inner := errors.Unwrap(err)
		if inner == nil {
			break
		}
		err = inner
	}
	msg := err.Error()
	for _, s := range secrets(dsn) {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

// secrets returns the substrings of dsn that may be passwords.
func secrets(dsn string) []string {
	var out []string
	for _, re := range secretPatterns {
		for _, m := range re.FindAllString(dsn, -1) {
			if _, v, ok := strings.Cut(m, "="); ok && strings.TrimSpace(v) != "" {
				out = append(out, strings.Trim(strings.TrimSpace(v), "'"))
			}
		}
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	} else if i := strings.Index(dsn, "://"); i >= 0 {
		// An unparseable URL: take what lies between the first ':' of the
		// user information and the last '@'.
		rest := dsn[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
				out = append(out, pw)
			}
		}
	}
	return out
}
