// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// What a reader of the store checks before it reads: that the database
// answers, that its schema is the one this code reads, and what it holds.

// Ping connects to the database and reports whether it answers. The error
// never holds the password.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("%s", s.redact(err.Error()))
	}
	return nil
}

// SchemaError says that the database's schema is not the version this code
// reads.
type SchemaError struct {
	// Have is the applied version (0: no schema at all); Want is
	// SchemaVersionWanted.
	Have, Want int64
	// Missing names the migration files newer than Have, in order.
	Missing []string
}

func (e *SchemaError) Error() string {
	switch {
	case e.Have == 0:
		return fmt.Sprintf("no errorownership schema (this code reads version %d)", e.Want)
	case e.Have < e.Want:
		return fmt.Sprintf("the schema is version %d, this code reads version %d: migration %s is missing", e.Have, e.Want, strings.Join(e.Missing, ", "))
	default:
		return fmt.Sprintf("the schema is version %d, newer than the version %d this code reads", e.Have, e.Want)
	}
}

// CheckSchema returns a *SchemaError unless the applied schema version is
// SchemaVersionWanted. Unlike the writer and the hints, it never migrates:
// a reader must not change a database it was only asked to read.
func (s *Store) CheckSchema(ctx context.Context) error {
	have, err := s.SchemaVersion(ctx)
	if schemaMissing(err) {
		have, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("%s", s.redact(err.Error()))
	}
	if want := SchemaVersionWanted(); have != want {
		return &SchemaError{Have: have, Want: want, Missing: MigrationsAfter(have)}
	}
	return nil
}

// MigrationsAfter returns the names of the embedded migration files newer
// than version, oldest first.
func MigrationsAfter(version int64) []string {
	names, _ := fs.Glob(migrationFS, "migrations/*.sql")
	var out []string
	for _, name := range names {
		base := path.Base(name)
		n, err := strconv.ParseInt(strings.SplitN(base, "_", 2)[0], 10, 64)
		if err == nil && n > version {
			out = append(out, base)
		}
	}
	slices.Sort(out)
	return out
}

// DataRange returns the first and last bucket with statistics; ok is false
// when the store holds none.
func (s *Store) DataRange(ctx context.Context) (first, last time.Time, ok bool, err error) {
	var lo, hi *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(bucket), max(bucket) FROM operation_stats`).Scan(&lo, &hi); err != nil {
		return time.Time{}, time.Time{}, false, fmt.Errorf("store: data range: %w", err)
	}
	if lo == nil || hi == nil {
		return time.Time{}, time.Time{}, false, nil
	}
	return lo.UTC(), hi.UTC(), true, nil
}

// Names are the names the statistics of a window hold.
type Names struct {
	// Services served requests or made calls; Peers were called.
	Services, Peers []string
	// Operations are each service's inbound operations.
	Operations map[string][]string
}

// Names returns the services, peers and operations with statistics in
// buckets that start in [from, to), each list sorted.
func (s *Store) Names(ctx context.Context, from, to time.Time) (*Names, error) {
	n := &Names{Operations: make(map[string][]string)}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
SELECT DISTINCT service, operation FROM operation_stats WHERE bucket >= $1 AND bucket < $2
UNION
SELECT DISTINCT service, operation FROM edge_stats WHERE bucket >= $1 AND bucket < $2`, from, to)
		if err != nil {
			return err
		}
		var svc, op string
		_, err = pgx.ForEachRow(rows, []any{&svc, &op}, func() error {
			n.Operations[svc] = append(n.Operations[svc], op)
			return nil
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT DISTINCT peer_service FROM edge_stats WHERE bucket >= $1 AND bucket < $2`, from, to)
		if err != nil {
			return err
		}
		n.Peers, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: names: %w", err)
	}
	for svc, ops := range n.Operations {
		slices.Sort(ops)
		n.Operations[svc] = slices.Compact(ops)
		n.Services = append(n.Services, svc)
	}
	slices.Sort(n.Services)
	slices.Sort(n.Peers)
	return n, nil
}
