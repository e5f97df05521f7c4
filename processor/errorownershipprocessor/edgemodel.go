package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

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

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// edgeModel is the edge model the processor's verdicts and its hints both
// read: its own (ownModel), or, with a store, the one merged from every
// replica's flushes (storeModel), so that a replica judges and advises by
// the same evidence as every other.
type edgeModel interface {
	// observe learns from a linked trace, if this model learns from traces.
	observe(tr *dependencyanalysis.Trace)
	// modes tells the verdicts each edge's mode.
	modes() dependencyanalysis.Modes
	// view returns the model as the hints serve it.
	view(ctx context.Context) (*edgeView, error)
	// symbols calls keep for every symbol the model holds (Symbols.Sweep).
	symbols(keep func(dependencyanalysis.Symbol))
}

// edgeView is the edge model at one moment, per calling service, in the
// hints' form. It is immutable but for the answers it caches.
type edgeView struct {
	at    time.Time
	edges map[string][]ownership.HintEdge // by calling service, sorted

	mu      sync.RWMutex
	answers map[string]*hintsAnswer
}

func newEdgeView(at time.Time) *edgeView {
	return &edgeView{at: at, edges: make(map[string][]ownership.HintEdge), answers: make(map[string]*hintsAnswer)}
}

func (v *edgeView) add(service string, e ownership.HintEdge) {
	v.edges[service] = append(v.edges[service], e)
}

// sort orders every service's edges, so that equal models encode equally.
func (v *edgeView) sort() {
	for _, edges := range v.edges {
		slices.SortFunc(edges, func(a, b ownership.HintEdge) int {
			return cmp.Or(strings.Compare(a.Operation, b.Operation), strings.Compare(a.PeerService, b.PeerService),
				strings.Compare(a.PeerOperation, b.PeerOperation))
		})
	}
}

// maxCachedAnswers bounds the answers a view keeps, so that requests for
// made-up service names cannot grow it: past it, answers are encoded anew.
const maxCachedAnswers = 10_000

// answer returns the service's encoded hints, encoding them once per view.
func (v *edgeView) answer(service string, encode func(service string, edges []ownership.HintEdge, at time.Time) (*hintsAnswer, error)) (*hintsAnswer, error) {
	v.mu.RLock()
	ans := v.answers[service]
	v.mu.RUnlock()
	if ans != nil {
		return ans, nil
	}
	ans, err := encode(service, v.edges[service], v.at)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	if len(v.answers) < maxCachedAnswers {
		v.answers[service] = ans
	}
	v.mu.Unlock()
	return ans, nil
}

// ownModel is the processor's own edge model, learned from the traces it
// analyses: the model without a store. Its hints view is rebuilt at most
// once per refresh, whatever the number of requests.
type ownModel struct {
	model   *dependencyanalysis.EdgeModel
	names   *dependencyanalysis.Symbols
	inUse   *sync.RWMutex // the processor's symbolsInUse
	refresh time.Duration
	now     func() time.Time

	rebuild sync.Mutex // one rebuild at a time; the others wait for it
	current atomic.Pointer[edgeView]
}

func (m *ownModel) observe(tr *dependencyanalysis.Trace) { m.model.Observe(tr) }

func (m *ownModel) modes() dependencyanalysis.Modes { return m.model }

func (m *ownModel) symbols(keep func(dependencyanalysis.Symbol)) { m.model.Symbols(keep) }

func (m *ownModel) fresh(now time.Time) *edgeView {
	if v := m.current.Load(); v != nil && now.Sub(v.at) < m.refresh {
		return v
	}
	return nil
}

func (m *ownModel) view(context.Context) (*edgeView, error) {
	if v := m.fresh(m.now()); v != nil {
		return v, nil
	}
	m.rebuild.Lock()
	defer m.rebuild.Unlock()
	now := m.now()
	if v := m.fresh(now); v != nil {
		return v, nil // built while this one waited
	}
	v := newEdgeView(now)
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
	m.current.Store(v)
	return v, nil
}

// storeModel is the edge model merged in the store from every replica's
// flushes, read back every interval: the model with a store. Until the
// first read succeeds, every edge is unknown and the hints unavailable.
type storeModel struct {
	store    *store.Store
	cfg      dependencyanalysis.ModelConfig
	names    *dependencyanalysis.Symbols
	inUse    *sync.RWMutex // the processor's symbolsInUse
	interval time.Duration
	logger   *zap.Logger

	table   atomic.Pointer[dependencyanalysis.ModeTable]
	current atomic.Pointer[edgeView]
	failing atomic.Bool // the last read failed; logged once until one succeeds
	first   sync.Mutex  // serialises the reads hints requests make before the first success

	stop context.CancelFunc // ends the reading, and a read in progress
	done chan struct{}
}

// errNoModelYet answers hints before the store's model was ever read.
var errNoModelYet = errors.New("the edge model has not been read from the store yet")

func (m *storeModel) observe(*dependencyanalysis.Trace) {} // the flushes teach it

func (m *storeModel) modes() dependencyanalysis.Modes {
	if t := m.table.Load(); t != nil {
		return *t
	}
	return dependencyanalysis.ModeTable(nil)
}

// view returns the model last read. Until a read has succeeded, a hints
// request reads it itself (one at a time), so that hints are served as
// soon as the database answers rather than at the next interval.
func (m *storeModel) view(ctx context.Context) (*edgeView, error) {
	if v := m.current.Load(); v != nil {
		return v, nil
	}
	m.first.Lock()
	defer m.first.Unlock()
	if v := m.current.Load(); v != nil {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.interval)
	defer cancel()
	m.read(ctx)
	if v := m.current.Load(); v != nil {
		return v, nil
	}
	return nil, errNoModelYet
}

func (m *storeModel) symbols(keep func(dependencyanalysis.Symbol)) {
	if t := m.table.Load(); t != nil {
		for k := range *t {
			keep(k.Service)
			keep(k.Operation)
			keep(k.PeerService)
			keep(k.PeerOperation)
		}
	}
}

// start reads the model now and every interval until shutdown, in the
// background: the collector must start whether the database is up or not.
// After a failed read the next comes sooner, from a second on, so that a
// database that comes back is read again soon.
func (m *storeModel) start() {
	var running context.Context
	running, m.stop = context.WithCancel(context.Background())
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
			ok := m.read(ctx)
			cancel()
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

// shutdown stops the reading, cutting a read in progress short, and waits
// for it.
func (m *storeModel) shutdown() {
	if m.stop != nil {
		m.stop()
		<-m.done
	}
}

// read loads the merged model and publishes it for the verdicts and the
// hints, and reports whether it could.
func (m *storeModel) read(ctx context.Context) bool {
	now := time.Now()
	est, err := m.store.EdgeModel(ctx, now.Add(-store.ModelWindow(m.cfg.HalfLife)), m.cfg.HalfLife, m.cfg)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return false // shutting down, or the hints request went away
		}
		if !m.failing.Swap(true) {
			m.logger.Warn("Cannot read the edge model from the store; verdicts and hints keep the last one read",
				zap.Error(err))
		}
		return false
	}
	if m.failing.Swap(false) {
		m.logger.Info("Reading the edge model from the store again")
	}
	v := newEdgeView(now)
	table := make(dependencyanalysis.ModeTable)
	// Only edges with a mode go in the table (absent is unknown), and
	// only names this collector has seen: no trace it analyses can name an
	// edge otherwise. The symbols are held until the table is published.
	m.inUse.RLock()
	for i := range est {
		e := &est[i]
		v.add(e.Service, e.HintEdge(e.Operation, e.PeerService, e.PeerOperation, e.PeerAddresses))
		if e.Mode == ownership.ModeUnknown {
			continue
		}
		k, ok := m.key(e)
		if ok {
			table[k] = e.Mode
		}
	}
	m.table.Store(&table)
	m.inUse.RUnlock()
	v.sort()
	m.current.Store(v)
	return true
}

func (m *storeModel) key(e *store.EdgeEstimate) (dependencyanalysis.EdgeKey, bool) {
	var k dependencyanalysis.EdgeKey
	for _, f := range [...]struct {
		sym  *dependencyanalysis.Symbol
		name string
	}{{&k.Service, e.Service}, {&k.Operation, e.Operation}, {&k.PeerService, e.PeerService}, {&k.PeerOperation, e.PeerOperation}} {
		if f.name == "" {
			continue
		}
		sym, ok := m.names.Lookup(f.name)
		if !ok {
			return k, false
		}
		*f.sym = sym
	}
	return k, true
}
