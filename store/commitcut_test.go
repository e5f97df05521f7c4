// SPDX-License-Identifier: Apache-2.0

package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/errorownership/errorownership/store/pgtest"
)

// cutMode says what the proxy does with the COMMIT of a flush.
type cutMode int

const (
	// cutAfterCommit forwards the COMMIT, then cuts the connection before
	// the server's answer gets back: the flush is committed, the client
	// cannot know it.
	cutAfterCommit cutMode = iota
	// cutBeforeCommit cuts the connection instead of forwarding the COMMIT:
	// the flush is rolled back, the client cannot know that either.
	cutBeforeCommit
)

// commitCutter is a TCP proxy to a PostgreSQL server that reads the
// frontend protocol and, once armed, cuts the connection at the COMMIT of
// the first transaction that writes a flush.
type commitCutter struct {
	ln     net.Listener
	target string // the server's unix socket
	mode   cutMode
	armed  atomic.Bool
	cuts   atomic.Int32
	wg     sync.WaitGroup
}

func startCommitCutter(t *testing.T, socket string, mode cutMode) *commitCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCutter{ln: ln, target: socket, mode: mode}
	p.armed.Store(true)
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *commitCutter) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *commitCutter) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.handle(client) })
	}
}

// handle relays one connection. Server to client is a plain copy that can
// be muted; client to server goes message by message so that the proxy
// knows when the client sends COMMIT.
func (p *commitCutter) handle(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("unix", p.target)
	if err != nil {
		return
	}
	defer server.Close()

	var mu sync.Mutex
	muted := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			mu.Lock()
			if n > 0 && !muted {
				if _, werr := client.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
			mu.Unlock()
			if err != nil {
				client.Close()
				return
			}
		}
	}()

	r := bufio.NewReader(client)
	// The startup message has no type byte; SSL and GSS encryption
	// requests precede it and are answered by one byte.
	for {
		msg, err := readUntyped(r)
		if err != nil {
			return
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
		if code := binary.BigEndian.Uint32(msg[4:8]); code != 80877103 && code != 80877104 {
			break
		}
	}
	writesFlush := false
	for {
		typ, msg, err := readTyped(r)
		if err != nil {
			return
		}
		body := msg[5:]
		if (typ == 'P' || typ == 'Q') && bytes.Contains(body, []byte("INSERT INTO flushes")) {
			writesFlush = true
		}
		commit := typ == 'Q' && strings.EqualFold(strings.TrimRight(string(body), "\x00; "), "commit")
		if commit && writesFlush && p.armed.CompareAndSwap(true, false) {
			// Mute the server first, so that not even a fast answer to
			// the COMMIT reaches the client.
			mu.Lock()
			muted = true
			mu.Unlock()
			cut := true
			if p.mode == cutAfterCommit {
				if _, err := server.Write(msg); err != nil {
					return
				}
				// Half-close: the server reads the COMMIT, then end of
				// file, and ends the session after committing. A failed
				// half-close is no cut, and the test sees the count short.
				cut = server.(*net.UnixConn).CloseWrite() == nil
			} else {
				// The server sees the client go and rolls back.
				server.Close()
			}
			if cut {
				p.cuts.Add(1)
			}
			client.Close()
			<-done
			return
		}
		if commit {
			writesFlush = false
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// readUntyped reads a length-prefixed message without a type byte.
func readUntyped(r *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 8 || n > 1<<20 {
		return nil, fmt.Errorf("bad startup message length %d", n)
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readTyped reads a message with a type byte and length.
func readTyped(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<30 {
		return 0, nil, errors.New("bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[5:])
	return hdr[0], msg, err
}

// A flush whose connection is cut at COMMIT, leaving the writer unsure
// whether it was written, is retried and counted exactly once, whether
// the COMMIT took effect or not.
func TestCommitCutRetriedCountsOnce(t *testing.T) {
	tests := []struct {
		name  string
		mode  cutMode
		dups  uint64 // the retry finds the flush written
		wrote uint64 // the retry writes the flush
	}{
		{"committed", cutAfterCommit, 1, 0},
		{"rolled back", cutBeforeCommit, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			cluster := pgtest.Shared(t)
			direct := newStore(t) // migrated directly
			proxy := startCommitCutter(t, filepath.Join(cluster.Dir(), ".s.PGSQL."+strconv.Itoa(cluster.Port())), tt.mode)
			dbname := direct.pool.Config().ConnConfig.Database
			viaProxy := openStore(t, fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", proxy.port(), dbname), DefaultConfig())

			w := NewWriter(viaProxy)
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			w.Enqueue(knownFlush("a", 1, t0))
			if err := w.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			st := w.Stats()
			t.Logf("%+v", st)
			if proxy.cuts.Load() != 1 {
				t.Fatalf("the proxy cut %d connections, want 1", proxy.cuts.Load())
			}
			if st.Retries < 1 || st.LastError == nil || !strings.Contains(st.LastError.Error(), "committing the flush") {
				t.Fatalf("the writer did not see the COMMIT fail: %+v", st)
			}
			if st.DuplicateFlushes != tt.dups || st.WrittenFlushes != tt.wrote {
				t.Fatalf("duplicates %d, written %d; want %d, %d (%+v)", st.DuplicateFlushes, st.WrittenFlushes, tt.dups, tt.wrote, st)
			}
			wantInt(t, direct, 1000, "served %d: the flush counts once", "SELECT sum(served) FROM operation_stats WHERE service = 'frontend'")
			wantInt(t, direct, 3, "%d audit entries", "SELECT count(*) FROM coincidental_audit")
			wantInt(t, direct, 1, "%d flushes recorded", "SELECT count(*) FROM flushes")
		})
	}
}

// The proxy itself relays ordinary traffic untouched.
func TestCommitCutterRelays(t *testing.T) {
	ctx := testContext(t)
	cluster := pgtest.Shared(t)
	proxy := startCommitCutter(t, filepath.Join(cluster.Dir(), ".s.PGSQL."+strconv.Itoa(cluster.Port())), cutAfterCommit)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", proxy.port()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT $1::int + 1", 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("got %d, %v", n, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("a transaction that writes no flush was cut: %v", err)
	}
}
