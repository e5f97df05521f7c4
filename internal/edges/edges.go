// SPDX-License-Identifier: Apache-2.0

// Package edges is the edge model the errorownership processor's verdicts
// and hints read (docs/design.md §5): the processor's own (Own), or, with a
// store, the one merged from every replica's flushes (Store), and the view
// of it the hints are served from (View).
package edges

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// Model is the edge model the processor's verdicts and its hints both
// read: its own (Own), or, with a store, the one merged from every
// replica's flushes (Store), so that a replica judges and advises by the
// same evidence as every other.
type Model interface {
	// Observe learns from a linked trace, if this model learns from
	// traces; the processor's workers call it at once.
	Observe(tr *dependencyanalysis.Trace)
	// Modes tells the verdicts each edge's mode.
	Modes() dependencyanalysis.Modes
	// View returns the model as the hints serve it.
	View(ctx context.Context) (*View, error)
	// Symbols calls keep for every symbol the model holds (Symbols.Sweep).
	Symbols(keep func(dependencyanalysis.Symbol))
}

// RLocker is what holds the processor's symbols in use while a model
// turns names into symbols or symbols into names: a sweep of the symbol
// table waits for it (dependencyanalysis.Symbols.Sweep).
type RLocker interface {
	RLock()
	RUnlock()
}

// View is the edge model at one moment, per calling service, in the hints'
// form. It is immutable.
type View struct {
	// At is when the model was read.
	At    time.Time
	edges map[string][]ownership.HintEdge // by calling service, sorted
}

func newView(at time.Time) *View {
	return &View{At: at, edges: make(map[string][]ownership.HintEdge)}
}

// NewViewOf returns a view read at at with the given edges by calling
// service, which it keeps and sorts: a model that is not one of this
// package's (a test's, say) gives its views so.
func NewViewOf(at time.Time, edges map[string][]ownership.HintEdge) *View {
	v := &View{At: at, edges: edges}
	v.sort()
	return v
}

// Edges returns the edges of the calling service, sorted by operation,
// peer service and peer operation; nil when it has none.
func (v *View) Edges(service string) []ownership.HintEdge { return v.edges[service] }

func (v *View) add(service string, e ownership.HintEdge) {
	v.edges[service] = append(v.edges[service], e)
}

// sort orders every service's edges, so that equal models encode equally.
func (v *View) sort() {
	for _, edges := range v.edges {
		slices.SortFunc(edges, func(a, b ownership.HintEdge) int {
			return cmp.Or(strings.Compare(a.Operation, b.Operation), strings.Compare(a.PeerService, b.PeerService),
				strings.Compare(a.PeerOperation, b.PeerOperation))
		})
	}
}

// Own is the processor's own edge model, learned from the traces it
// analyses: the model without a store. Each View builds the view anew;
// Every bounds how often.
type Own struct {
	model *dependencyanalysis.EdgeModel
	names *dependencyanalysis.Symbols
	inUse RLocker
	now   func() time.Time
}

// NewOwn returns model as the processor's model, its names in names.
func NewOwn(model *dependencyanalysis.EdgeModel, names *dependencyanalysis.Symbols, inUse RLocker) *Own {
	return &Own{model: model, names: names, inUse: inUse, now: time.Now}
}

// EdgeModel returns the model that learns.
func (m *Own) EdgeModel() *dependencyanalysis.EdgeModel { return m.model }

// Observe lets the model learn from tr.
func (m *Own) Observe(tr *dependencyanalysis.Trace) { m.model.Observe(tr) }

// Modes returns the model itself: verdicts read it live.
func (m *Own) Modes() dependencyanalysis.Modes { return m.model }

// Symbols keeps the model's symbols.
func (m *Own) Symbols(keep func(dependencyanalysis.Symbol)) { m.model.Symbols(keep) }

// View builds the model's view now.
func (m *Own) View(context.Context) (*View, error) {
	v := newView(m.now())
	// The names are resolved before a sweep could free them.
	m.inUse.RLock()
	m.model.Edges(func(k dependencyanalysis.EdgeKey, est dependencyanalysis.Estimate, addrs []dependencyanalysis.Symbol) {
		var addresses []string
		for _, a := range addrs {
			addresses = append(addresses, m.names.Name(a))
		}
		slices.Sort(addresses)
		v.add(m.names.Name(k.Service), est.HintEdge(m.names.Name(k.Operation), m.names.Name(k.PeerService),
			m.names.Name(k.PeerOperation), addresses))
	})
	m.inUse.RUnlock()
	v.sort()
	return v, nil
}

// Viewer is what gives a View: a Model, or what serves one.
type Viewer interface {
	View(ctx context.Context) (*View, error)
}

// Every returns v's views, each reused until it is refresh old, so that a
// thousand hints requests a second cost one build a second whatever the
// number of callers: the others wait for the build in progress.
func Every(v Viewer, refresh time.Duration) Viewer {
	return &every{src: v, refresh: refresh, now: time.Now}
}

type every struct {
	src     Viewer
	refresh time.Duration
	now     func() time.Time

	rebuild sync.Mutex // one rebuild at a time; the others wait for it
	current atomic.Pointer[View]
}

func (e *every) fresh(now time.Time) *View {
	if v := e.current.Load(); v != nil && now.Sub(v.At) < e.refresh {
		return v
	}
	return nil
}

func (e *every) View(ctx context.Context) (*View, error) {
	if v := e.fresh(e.now()); v != nil {
		return v, nil
	}
	e.rebuild.Lock()
	defer e.rebuild.Unlock()
	if v := e.fresh(e.now()); v != nil {
		return v, nil // built while this one waited
	}
	v, err := e.src.View(ctx)
	if err != nil {
		return nil, err
	}
	e.current.Store(v)
	return v, nil
}

// Store is the edge model merged in the store from every replica's
// flushes, read back every interval: the model with a store. Until the
// first read succeeds, every edge is unknown and the hints unavailable.
type Store struct {
	store    *store.Store
	cfg      dependencyanalysis.ModelConfig
	names    *dependencyanalysis.Symbols // nil: views only, no modes
	inUse    RLocker
	interval time.Duration
	logger   *zap.Logger
	// onRead, if set, is told the outcome of every read in the
	// background: the component reports its status by it.
	onRead func(error)

	table   atomic.Pointer[dependencyanalysis.ModeTable]
	current atomic.Pointer[View]
	failing atomic.Bool // the last read failed; logged once until one succeeds
	// first coalesces the reads hints requests make before the first
	// success: however many wait, the database sees one read at a time,
	// and every waiter gets its outcome.
	first singleflight.Group

	// running ends at Shutdown, cutting short the background reading and
	// a read a hints request shares.
	running context.Context
	stop    context.CancelFunc
	done    chan struct{} // closed when the background reading has ended; nil until Start
}

// ErrNoModelYet is View's error before the store's model could ever be read.
var ErrNoModelYet = errors.New("the edge model has not been read from the store yet")

// NewStore returns the model merged in st, judged by cfg, read every
// interval once started; names map it onto the processor's symbols. With
// names nil the model is read for its views alone (the hints extension's),
// and Modes stays empty.
func NewStore(st *store.Store, cfg dependencyanalysis.ModelConfig, names *dependencyanalysis.Symbols, inUse RLocker, interval time.Duration, logger *zap.Logger) *Store {
	m := &Store{store: st, cfg: cfg, names: names, inUse: inUse, interval: interval, logger: logger}
	m.running, m.stop = context.WithCancel(context.Background())
	return m
}

// OnRead has f told the outcome of each background read, nil for a
// success, from the goroutine that reads. It must be called before Start.
func (m *Store) OnRead(f func(error)) { m.onRead = f }

// Observe does nothing: the flushes teach this model, through the store.
func (m *Store) Observe(*dependencyanalysis.Trace) {}

// Modes returns the edges with a mode in the model last read.
func (m *Store) Modes() dependencyanalysis.Modes {
	if t := m.table.Load(); t != nil {
		return *t
	}
	return dependencyanalysis.ModeTable(nil)
}

// View returns the model last read. Until a read has succeeded, a hints
// request reads it itself, so that hints are served as soon as the
// database answers rather than at the next interval; concurrent requests
// share one read, which no single request's going away cuts short.
func (m *Store) View(ctx context.Context) (*View, error) {
	if v := m.current.Load(); v != nil {
		return v, nil
	}
	ch := m.first.DoChan("", func() (any, error) {
		if v := m.current.Load(); v != nil {
			return v, nil
		}
		read, cancel := context.WithTimeout(m.running, m.interval)
		defer cancel()
		m.Read(read)
		if v := m.current.Load(); v != nil {
			return v, nil
		}
		return nil, ErrNoModelYet
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*View), nil
	case <-ctx.Done():
		return nil, ErrNoModelYet
	}
}

// Symbols keeps the symbols of the model last read.
func (m *Store) Symbols(keep func(dependencyanalysis.Symbol)) {
	if t := m.table.Load(); t != nil {
		for k := range *t {
			keep(k.Service)
			keep(k.Operation)
			keep(k.PeerService)
			keep(k.PeerOperation)
		}
	}
}

// Start reads the model now and every interval until shutdown, in the
// background: the collector must start whether the database is up or not.
// After a failed read the next comes sooner, from a second on, so that a
// database that comes back is read again soon.
func (m *Store) Start() {
	running := m.running
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		t := time.NewTimer(0)
		defer t.Stop()
		retry := time.Second
		for {
			select {
			case <-running.Done():
				return
			case <-t.C:
			}
			// The timeout bounds a read stuck on a database that stopped
			// answering, so that the next one is tried.
			ctx, cancel := context.WithTimeout(running, m.interval)
			err := m.read(ctx)
			cancel()
			ok := err == nil
			if m.onRead != nil && running.Err() == nil {
				m.onRead(err)
			}
			if ok {
				retry = time.Second
				t.Reset(m.interval)
				continue
			}
			t.Reset(min(retry, m.interval))
			retry *= 2
		}
	}()
}

// Shutdown stops the reading, cutting a read in progress short, and waits
// for it.
func (m *Store) Shutdown() {
	m.stop()
	if m.done != nil {
		<-m.done
	}
}

// ReadAt returns when the model served was read, zero before a first read.
func (m *Store) ReadAt() time.Time {
	if v := m.current.Load(); v != nil {
		return v.At
	}
	return time.Time{}
}

// Read loads the merged model and publishes it for the verdicts and the
// hints, and reports whether it could.
func (m *Store) Read(ctx context.Context) bool { return m.read(ctx) == nil }

func (m *Store) read(ctx context.Context) error {
	now := time.Now()
	est, err := m.store.EdgeModel(ctx, now.Add(-store.ModelWindow(m.cfg.HalfLife)), m.cfg.HalfLife, m.cfg)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return err // shutting down, or the hints request went away
		}
		if !m.failing.Swap(true) {
			m.logger.Warn("Cannot read the edge model from the store; verdicts and hints keep the last one read",
				zap.Error(err))
		}
		return err
	}
	if m.failing.Swap(false) {
		m.logger.Info("Reading the edge model from the store again")
	}
	est = mostRecent(est, cmp.Or(m.cfg.MaxEdges, dependencyanalysis.DefaultMaxEdges))
	v := newView(now)
	for i := range est {
		e := &est[i]
		v.add(e.Service, e.HintEdge(e.Operation, e.PeerService, e.PeerOperation, e.PeerAddresses))
	}
	if m.names != nil {
		m.publishModes(est)
	}
	v.sort()
	m.current.Store(v)
	return nil
}

// mostRecent keeps the limit edges seen most recently, as a model that
// learns keeps them (edge_model.max_edges), so that the merged model of a
// large fleet takes no more memory than a replica's own would.
func mostRecent(est []store.EdgeEstimate, limit int) []store.EdgeEstimate {
	if len(est) <= limit {
		return est
	}
	slices.SortFunc(est, func(a, b store.EdgeEstimate) int { return b.LastSeen.Compare(a.LastSeen) })
	return slices.Clip(est[:limit])
}

// publishModes makes the edges with a mode the table verdicts read (absent
// is unknown). Their names are interned, seen here before or not: a replica
// that has just started must judge its first traces by what the others
// learned. The symbols are held until the table is published.
func (m *Store) publishModes(est []store.EdgeEstimate) {
	table := make(dependencyanalysis.ModeTable)
	m.inUse.RLock()
	defer m.inUse.RUnlock()
	for i := range est {
		e := &est[i]
		if e.Mode == ownership.ModeUnknown {
			continue
		}
		if k, ok := m.key(e); ok {
			table[k] = e.Mode
		}
	}
	m.table.Store(&table)
}

func (m *Store) key(e *store.EdgeEstimate) (dependencyanalysis.EdgeKey, bool) {
	var k dependencyanalysis.EdgeKey
	for _, f := range [...]struct {
		sym  *dependencyanalysis.Symbol
		name string
	}{{&k.Service, e.Service}, {&k.Operation, e.Operation}, {&k.PeerService, e.PeerService}, {&k.PeerOperation, e.PeerOperation}} {
		if f.name == "" {
			continue
		}
		sym := m.names.Intern(f.name)
		if sym == m.names.Overflow() && f.name != dependencyanalysis.OverflowName {
			return k, false // the table is full: "_other" must not get this edge's mode
		}
		*f.sym = sym
	}
	return k, true
}

// Config returns how the model judges the merged counts.
func (m *Store) Config() dependencyanalysis.ModelConfig { return m.cfg }
