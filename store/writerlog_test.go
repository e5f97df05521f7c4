// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// secret is the password of the test DSNs; no log line may show it.
const secret = "hunter2-s3cr3t"

// unreachableStore opens a store on a socket that does not exist, with a
// password in its DSN and a short shutdown timeout.
func unreachableStore(t *testing.T) *Store {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DSN = configopaque.String("postgres://collector:" + secret + "@/stats?host=/nonexistent&sslmode=disable")
	cfg.ShutdownTimeout = 200 * time.Millisecond
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// checkNoSecret fails the test if a logged line shows the password,
// without printing it.
func checkNoSecret(t *testing.T, logs *observer.ObservedLogs) {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, e := range logs.All() {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), secret) {
			t.Errorf("the log line %q shows the password", e.Message)
		}
		buf.Free()
	}
}

// Failures are logged at once, then at most once per interval with what
// was left out, and the recovery once; never with the password.
func TestWriterLogsFailuresRateLimited(t *testing.T) {
	s := unreachableStore(t)
	core, logs := observer.New(zap.InfoLevel)
	w := NewWriter(s, WithLogger(zap.New(core))) // not started: the test calls its reports
	clock := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return clock }
	// Errors may quote what they were given; the writer must not pass the
	// password on.
	err := errors.New("store: failed to connect to `user=collector password=" + secret + "`: connection refused")

	steps := []struct {
		name    string
		advance time.Duration
		fail    bool // else a write succeeds
		want    string
		fields  map[string]int64
	}{
		{"the first failure is logged at once", 0, true, "Cannot write error-ownership statistics", nil},
		{"the next within the minute is not", 10 * time.Second, true, "", nil},
		{"nor the one after", 10 * time.Second, true, "", nil},
		{"a minute after the last line, one line with the count", time.Minute, true, "Still cannot write",
			map[string]int64{"failed_attempts": 4, "failures_unlogged": 2}},
		{"the recovery", time.Second, false, "Writing error-ownership statistics to the store again",
			map[string]int64{"failed_attempts": 4}},
		{"the first failure of the next outage is logged at once", time.Second, true, "Cannot write error-ownership statistics", nil},
	}
	for _, st := range steps {
		clock = clock.Add(st.advance)
		before := logs.Len()
		if st.fail {
			w.failed(err)
		} else {
			w.succeeded()
		}
		lines := logs.All()[before:]
		if st.want == "" {
			if len(lines) != 0 {
				t.Fatalf("%s: logged %q", st.name, lines[0].Message)
			}
			continue
		}
		if len(lines) != 1 || !strings.Contains(lines[0].Message, st.want) {
			t.Fatalf("%s: logged %v, want one line saying %q", st.name, messages(logs)[before:], st.want)
		}
		got := lines[0].ContextMap()
		for k, v := range st.fields {
			if n, _ := got[k].(int64); n != v {
				t.Errorf("%s: %s = %v, want %d", st.name, k, got[k], v)
			}
		}
	}
	checkNoSecret(t, logs)
}

// A writer that cannot reach its database logs the first failure, not
// every attempt, and what shutdown had to drop; never the password.
func TestWriterLogsUnreachableDatabase(t *testing.T) {
	s := unreachableStore(t)
	core, logs := observer.New(zap.InfoLevel)
	w := NewWriter(s, WithLogger(zap.New(core)))
	w.minBackoff, w.maxBackoff = time.Millisecond, time.Millisecond
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Enqueue(tinyFlush(1, t0))
	waitFor(t, time.Minute, "failed attempts", func() bool { return w.Stats().Retries >= 5 })
	err := w.Shutdown(context.Background())
	if err == nil {
		t.Fatal("Shutdown reported nothing unwritten")
	}
	if strings.Contains(err.Error(), secret) {
		t.Error("the Shutdown error shows the password")
	}
	if n := logs.FilterMessageSnippet("Cannot write error-ownership statistics").Len(); n != 1 {
		t.Errorf("%d lines about the first failure, want 1: %v", n, messages(logs))
	}
	left := logs.FilterMessageSnippet("Shutdown left error-ownership statistics unwritten").All()
	if len(left) != 1 || left[0].ContextMap()["flushes"] != int64(1) || left[0].Level != zapcore.ErrorLevel {
		t.Errorf("shutdown logged %v, want one error saying 1 flush was left", messages(logs))
	}
	checkNoSecret(t, logs)
}

// Shutdown gives up after Config.ShutdownTimeout even when its context has
// no deadline, as the collector's has not.
func TestShutdownTimeout(t *testing.T) {
	s := unreachableStore(t)
	w := NewWriter(s)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Enqueue(tinyFlush(1, t0))
	waitFor(t, time.Minute, "a failed attempt", func() bool { return w.Stats().Retries > 0 })
	done := make(chan error, 1)
	go func() { done <- w.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 flushes (5 rows) unwritten") {
			t.Fatalf("Shutdown = %v, want the flush left unwritten at the deadline", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("Shutdown still running a minute after a %v shutdown timeout", s.cfg.ShutdownTimeout)
	}
	if st := w.Stats(); st.DroppedFlushes != 1 || st.PendingFlushes != 0 {
		t.Fatalf("after Shutdown: %+v", st)
	}
}
