// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/errorownership/errorownership/store"
)

// storeFlags are the flags of the commands that read the store.
type storeFlags struct {
	dsn     string
	timeout time.Duration
}

// dsnUsage describes --dsn for the commands that read the store.
const dsnUsage = "PostgreSQL connection string, postgres://user@host:5432/dbname or key=value pairs (default: the PG* variables, as libpq reads them; give a password by PGPASSWORD or ~/.pgpass)"

func (f *storeFlags) add(fs *pflag.FlagSet) { f.addWith(fs, dsnUsage) }

// addWith is add with --dsn described by usage.
func (f *storeFlags) addWith(fs *pflag.FlagSet, usage string) {
	fs.StringVar(&f.dsn, "dsn", "", usage)
	fs.DurationVar(&f.timeout, "db-timeout", 10*time.Second, "how long to wait for the database to answer")
}

// pointElsewhere says how to name another database.
const pointElsewhere = "point errorownership at the collector's database with --dsn postgres://user@host:5432/dbname, " +
	"or the PGHOST, PGPORT, PGDATABASE and PGUSER variables (a password by PGPASSWORD or ~/.pgpass)"

// open opens the store and checks that the database answers and holds the
// schema this version reads; its errors say what to do. It never migrates:
// these commands only read.
func (f *storeFlags) open(ctx context.Context) (*store.Store, error) {
	st, err := store.OpenDSN(ctx, f.dsn)
	if err != nil {
		return nil, fmt.Errorf("--dsn: %s", strings.TrimPrefix(err.Error(), "dsn: "))
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := st.Ping(ctx); err != nil {
		st.Close()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within --db-timeout %v", f.timeout)
		}
		return nil, fmt.Errorf("cannot reach the database (%s): %w\n%s", st, err, pointElsewhere)
	}
	if err := st.CheckSchema(ctx); err != nil {
		st.Close()
		var se *store.SchemaError
		if !errors.As(err, &se) {
			return nil, fmt.Errorf("database %s: %w", st, err)
		}
		return nil, fmt.Errorf("database %s: %w\n%s", st, se, schemaAdvice(se))
	}
	return st, nil
}

// schemaAdvice says how to bring the schema and this command to one
// version.
func schemaAdvice(se *store.SchemaError) string {
	switch {
	case se.Have == 0:
		return "Is this the collector's database? The errorownership collector creates the schema when it starts with a store section pointing at it; " + pointElsewhere
	case se.Have < se.Want:
		return "Apply it by starting the errorownership collector of this version with its store section pointing at this database: it applies the missing migrations when it starts (and every replica may keep running meanwhile)"
	default:
		return "The collector writing here is newer than this command: use the errorownership command of the collector's version"
	}
}

// windowFlags choose a time window: the last --since, or --from/--to.
type windowFlags struct {
	since    time.Duration
	from, to string
}

func (w *windowFlags) add(fs *pflag.FlagSet, since time.Duration) {
	fs.DurationVar(&w.since, "since", since, "the window is the last this long (such as 30m, 6h); or give --from")
	fs.StringVar(&w.from, "from", "", "window start, such as 2026-11-29T16:00:00Z or 2026-11-29 16:00 (UTC)")
	fs.StringVar(&w.to, "to", "", "window end (default: now)")
}

// timeLayouts are the spellings --from and --to accept; those without a
// zone are UTC.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}

func parseTime(flag, s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q is not a time: write it as 2026-11-29T16:00:00Z, 2026-11-29 16:00 (UTC) or 2026-11-29", flag, s)
}

// window returns [from, to) at now.
func (w *windowFlags) window(fs *pflag.FlagSet, now time.Time) (from, to time.Time, err error) {
	to = now.UTC()
	if w.to != "" {
		if to, err = parseTime("--to", w.to); err != nil {
			return
		}
	}
	switch {
	case w.from != "" && fs.Changed("since"):
		return from, to, errors.New("--since and --from both given: give one")
	case w.from != "":
		if from, err = parseTime("--from", w.from); err != nil {
			return
		}
	case w.since <= 0:
		return from, to, fmt.Errorf("--since %v must be positive, such as 1h", w.since)
	default:
		from = to.Add(-w.since)
	}
	if !from.Before(to) {
		return from, to, fmt.Errorf("the window is empty: --from %s is not before --to %s", stamp(from), stamp(to))
	}
	return from, to, nil
}

// stamp prints a time as the flags take it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// emptyWindowError says that [from, to) holds no statistics and which time
// range does.
func emptyWindowError(ctx context.Context, st *store.Store, from, to time.Time) error {
	first, last, ok, err := st.DataRange(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the database (%s) holds no statistics yet: is a collector with a store section writing to it? (%s)", st, pointElsewhere)
	}
	// last is when the last bucket starts; it ends within an hour, the
	// longest store.bucket, and its audit rows are dated within it.
	return fmt.Errorf("no statistics from %s to %s; the database holds them from %s to %s: try --from %s --to %s, or a --since that reaches back to them",
		stamp(from), stamp(to), stamp(first), stamp(last.Add(time.Hour)), stamp(first), stamp(last.Add(time.Hour)))
}

// windowNames returns the names the window holds, or emptyWindowError.
func windowNames(ctx context.Context, st *store.Store, from, to time.Time) (*store.Names, error) {
	n, err := st.Names(ctx, from, to)
	if err != nil {
		return nil, err
	}
	if len(n.Services) == 0 && len(n.Peers) == 0 {
		return nil, emptyWindowError(ctx, st, from, to)
	}
	return n, nil
}
