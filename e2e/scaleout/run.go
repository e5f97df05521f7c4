// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/internal/pgcluster"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// The deployments, as Report names them.
const (
	Gateway      = "gateway"
	Kafka        = "kafka"
	LoadBalancer = "load balancer"
)

// Topic is the topic the front tier produces to, as the shipped
// configurations name it.
const Topic = "otlp_spans"

// analysisPrefix starts the names of the Kafka deployment's analysis
// collectors: analysis-1, analysis-2…
const analysisPrefix = "analysis-"

// Options configure Run. Zero values take the defaults in brackets.
type Options struct {
	// Collector is the built collector binary (`make otelcol`).
	Collector string
	// Configs is the directory of the shipped configurations (testdata/).
	Configs string
	// Cluster is the PostgreSQL cluster the deployments' databases are
	// created in.
	Cluster *pgcluster.Cluster
	// Dir receives the collectors' configurations and exported spans.
	Dir string
	// Partitions are the topic's [8]; Replicas the analysis collectors
	// consuming it at first [2].
	Partitions, Replicas int
	// ChainRequests are the root requests per chain policy, and
	// CheckoutRequests the checkout root requests, in each of the warm-up,
	// measured and scaled phases [150, 2000].
	ChainRequests, CheckoutRequests int
	// Rebalance is how long traffic flows in the rebalance phase, in which
	// one analysis collector is stopped after a quarter of it and another
	// started after half [24s].
	Rebalance time.Duration
	// Timings are the collectors' [decision_wait 2s].
	Timings Timings
	// Seed seeds the simulated services' faults [1].
	Seed uint64
	// Progress receives a line per step.
	Progress io.Writer
}

func (o *Options) defaults() {
	o.Partitions = cmp.Or(o.Partitions, 8)
	o.Replicas = cmp.Or(o.Replicas, 2)
	o.ChainRequests = cmp.Or(o.ChainRequests, 150)
	o.CheckoutRequests = cmp.Or(o.CheckoutRequests, 2000)
	o.Rebalance = cmp.Or(o.Rebalance, 24*time.Second)
	o.Timings.DecisionWait = cmp.Or(o.Timings.DecisionWait, 2*time.Second)
	o.Seed = cmp.Or(o.Seed, 1)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Phase is one phase of traffic and what every deployment made of it.
type Phase struct {
	Name string
	// Sent is what every deployment sending in the phase was sent.
	Sent Sent
	// Figures are what each deployment's store held once the phase was
	// analysed, by deployment; Gained what it gained in the phase.
	Figures map[string]*Figures
	Gained  map[string]Counts
	// Telemetry is what each running collector reported then, by name.
	Telemetry map[string]Telemetry
	// Hints are what each analysing collector served then, by collector
	// and then service, generated_at cleared (the measured and scaled
	// phases).
	Hints map[string]map[string]*ownership.Hints

	traces map[[16]byte]struct{} // the phase's trace IDs
}

// Handover is what stopping one analysis collector and starting another
// while traffic flowed did.
type Handover struct {
	// Stopped is the collector stopped with SIGTERM; it consumed Moved
	// partitions. It exited StopTook after the signal, and TakenOver after
	// it the others consumed every partition again.
	Stopped             string
	Moved               float64
	StopTook, TakenOver time.Duration
	// Joined is the collector started afterwards. Its health check
	// answered StartTook after it was started, and it consumed its share of
	// the partitions JoinTook after it was started.
	Joined              string
	StartTook, JoinTook time.Duration
	// Added is the collector started once the traffic stopped, to consume
	// with the others in the scaled phase.
	Added string
	// Delivered counts the spans each analysis collector consumed and
	// passed on, over the whole run, by name.
	Delivered map[string]int
	// Duplicates counts spans passed on more than once (by one collector
	// or several); Missing spans the front tier was sent that no analysis
	// collector passed on.
	Duplicates, Missing int
	// Split counts the traces of the rebalance phase whose spans went to
	// more than one analysis collector, so that each analysed a part of
	// them; Traces the phase's traces.
	Split, Traces int
}

// Report is everything Run measured.
type Report struct {
	Options Options
	// Warmup, Measured, Rebalanced and Scaled are the phases: identical
	// traffic for every deployment to learn the edge model from; the same
	// traffic again once every collector judges by that model; traffic
	// while the Kafka deployment's consumer group rebalances; and the
	// measured traffic again with one more analysis collector in the
	// group. The last two go to the gateway and the Kafka deployment only.
	Warmup, Measured, Rebalanced, Scaled Phase
	Handover                             Handover
	// Collectors lists the collectors by deployment, in start order.
	Collectors map[string][]string
	// Logs are the collectors' logs (their ends), by name.
	Logs map[string]string
	Took time.Duration
}

// run is one Run's state.
type run struct {
	o      Options
	begin  time.Time
	launch *launcher
	broker *Broker
	tee    *Tee
	stores map[string]*store.Store
	// collectors by deployment; every collector started; those stopped
	// on purpose.
	deployed map[string][]*Collector
	all      []*Collector
	stopped  map[*Collector]bool
	rep      *Report
}

// stop stops c with SIGTERM and waits for it to exit.
func (r *run) stop(c *Collector) error {
	r.stopped[c] = true
	_, err := c.Terminate(time.Minute)
	return err
}

// crashed returns an error naming a collector that exited unasked, with
// the end of its log, so that a wait fails at once rather than at its
// timeout.
func (r *run) crashed() error {
	for _, c := range r.all {
		if !c.Running() && !r.stopped[c] {
			return fmt.Errorf("%s exited: %w\n%s", c.Name(), c.Wait(0), c.LogTail(4<<10))
		}
	}
	return nil
}

func (r *run) progress(format string, args ...any) {
	fmt.Fprintf(r.o.Progress, "[%5.1fs] %s\n", time.Since(r.begin).Seconds(), fmt.Sprintf(format, args...))
}

// Run starts the three deployments, sends them the simulator's traffic in
// four phases and reads back what each made of it. It returns the report
// so far with any error, so that the collectors' logs can be shown.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	o.defaults()
	r := &run{o: o, begin: time.Now(), stores: map[string]*store.Store{}, deployed: map[string][]*Collector{}, stopped: map[*Collector]bool{},
		rep: &Report{Options: o, Collectors: map[string][]string{}, Logs: map[string]string{}}}
	r.launch = &launcher{bin: o.Collector, configs: o.Configs, dir: o.Dir, timings: o.Timings}
	defer func() {
		for _, c := range r.all {
			c.Kill()
			r.rep.Logs[c.Name()] = c.LogTail(32 << 10)
		}
		for _, st := range r.stores {
			st.Close()
		}
		if r.tee != nil {
			_ = r.tee.Close()
		}
		if r.broker != nil {
			r.broker.Close()
		}
		r.rep.Took = time.Since(r.begin)
	}()
	err = r.run(ctx)
	return r.rep, err
}

func (r *run) run(ctx context.Context) error {
	o := r.o
	var err error
	if r.broker, err = StartBroker(Topic, o.Partitions); err != nil {
		return err
	}
	r.progress("Kafka broker (kfake) at %s: topic %s, %d partitions", r.broker.Addr, Topic, o.Partitions)
	for _, d := range []string{Gateway, Kafka, LoadBalancer} {
		dsn, err := o.Cluster.CreateDatabase(ctx, "scaleout_"+strings.ReplaceAll(d, " ", "_"))
		if err != nil {
			return err
		}
		if r.stores[d], err = store.OpenDSN(ctx, dsn); err != nil {
			return err
		}
	}
	if r.tee, err = StartTee(); err != nil {
		return err
	}

	r.progress("starting the collectors (decision_wait %v): one gateway; two behind a load balancer; a Kafka front tier and %d analysis collectors",
		o.Timings.DecisionWait, o.Replicas)
	var starts []func() (*Collector, error)
	var deployments []string
	add := func(deployment, name string, start func() (*Collector, error)) {
		r.rep.Collectors[deployment] = append(r.rep.Collectors[deployment], name)
		deployments = append(deployments, deployment)
		starts = append(starts, start)
	}
	add(Gateway, Gateway, func() (*Collector, error) { return r.launch.gateway(ctx, Gateway, r.dsn(Gateway)) })
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("lb-%d", i)
		add(LoadBalancer, name, func() (*Collector, error) { return r.launch.gateway(ctx, name, r.dsn(LoadBalancer)) })
	}
	add(Kafka, "front", func() (*Collector, error) { return r.launch.front(ctx, "front", r.broker.Addr) })
	for i := 1; i <= o.Replicas; i++ {
		name := fmt.Sprintf(analysisPrefix+"%d", i)
		add(Kafka, name, func() (*Collector, error) { return r.launch.analysis(ctx, name, r.broker.Addr, r.dsn(Kafka)) })
	}
	started := make([]*Collector, len(starts))
	errs := make([]error, len(starts))
	var wg sync.WaitGroup
	for i, start := range starts {
		wg.Go(func() { started[i], errs[i] = start() })
	}
	wg.Wait()
	for i, c := range started {
		if c != nil {
			r.all = append(r.all, c)
			r.deployed[deployments[i]] = append(r.deployed[deployments[i]], c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.tee.Send(Gateway, false, r.deployed[Gateway][0].OTLPAddr)
	r.tee.Send(Kafka, true, r.deployed[Kafka][0].OTLPAddr)
	r.tee.Send(LoadBalancer, false, r.deployed[LoadBalancer][0].OTLPAddr, r.deployed[LoadBalancer][1].OTLPAddr)

	r.progress("waiting for the consumer group to give each analysis collector its share of the %d partitions…", o.Partitions)
	if _, err := r.waitPartitions(ctx, r.analysers(), nil); err != nil {
		return err
	}
	r.progress("  %s", r.partitionLine())

	// Warm-up: every deployment learns the same edge model from the same
	// spans. Verdicts depend on the model a collector read back from its
	// store when it judged (docs/design.md §5), which differs in time
	// between deployments while the model is being learned; once each
	// has read the whole warm-up's model back, the measured phase's
	// traffic, which changes no edge's mode, is judged by the same model
	// everywhere.
	if err := r.phase(ctx, &r.rep.Warmup, nil, "warm-up", func() error { return r.traffic(ctx) }); err != nil {
		return err
	}
	if err := r.waitHints(ctx, nil); err != nil {
		return err
	}
	if err := r.phase(ctx, &r.rep.Measured, &r.rep.Warmup, "measured", func() error { return r.traffic(ctx) }); err != nil {
		return err
	}
	if err := r.waitHints(ctx, &r.rep.Measured); err != nil {
		return err
	}

	r.progress("stopping the load-balanced collectors")
	r.tee.Stop(LoadBalancer)
	for _, c := range r.deployed[LoadBalancer] {
		if err := r.stop(c); err != nil {
			return err
		}
	}
	if err := r.phase(ctx, &r.rep.Rebalanced, &r.rep.Measured, "rebalance", func() error { return r.rebalance(ctx) }); err != nil {
		return err
	}

	// One more analysis collector joins. The model is the warm-up's still,
	// as far as modes go, and every collector reads it back between
	// extracting a trace and judging it (decision_wait > model_refresh), so
	// the newcomer judges like the others from its first trace.
	h := &r.rep.Handover
	h.Added = r.nextAnalyser()
	r.progress("starting %s, to consume with the others", h.Added)
	if _, _, err := r.join(ctx, h.Added); err != nil {
		return err
	}
	r.progress("  %s", r.partitionLine())
	if err := r.waitHints(ctx, nil); err != nil {
		return err
	}
	if err := r.phase(ctx, &r.rep.Scaled, &r.rep.Rebalanced, "scaled", func() error { return r.traffic(ctx) }); err != nil {
		return err
	}
	if err := r.waitHints(ctx, &r.rep.Scaled); err != nil {
		return err
	}

	r.progress("stopping every collector (the analysis collectors' file exporters write the spans they consumed)")
	for _, c := range r.all {
		if !c.Running() {
			continue
		}
		if err := r.stop(c); err != nil {
			return err
		}
	}
	return r.deliveries()
}

// dsn returns the DSN of a deployment's database.
func (r *run) dsn(deployment string) string {
	return r.stores[deployment].Pool().Config().ConnString()
}

// nextAnalyser names the next analysis collector to start.
func (r *run) nextAnalyser() string {
	n := 1
	for _, c := range r.deployed[Kafka] {
		if c.Exported != "" {
			n++
		}
	}
	return fmt.Sprintf(analysisPrefix+"%d", n)
}

// analysers returns the Kafka deployment's analysis collectors still
// running.
func (r *run) analysers() []*Collector {
	var out []*Collector
	for _, c := range r.deployed[Kafka] {
		if c.Exported != "" && c.Running() {
			out = append(out, c)
		}
	}
	return out
}

// sending returns the deployments the tee sends to now.
func (r *run) sending() []string {
	if len(r.deployed[LoadBalancer]) > 0 && r.deployed[LoadBalancer][0].Running() {
		return []string{Gateway, Kafka, LoadBalancer}
	}
	return []string{Gateway, Kafka}
}

// phase sends a phase's traffic, waits until every deployment has
// analysed and stored it, and records what each made of it.
// prev is the phase before, if any.
func (r *run) phase(ctx context.Context, p, prev *Phase, name string, traffic func() error) error {
	p.Name = name
	r.tee.BeginPhase()
	if err := traffic(); err != nil {
		return err
	}
	if err := r.tee.Err(); err != nil {
		return err
	}
	p.Sent, p.traces = r.tee.Phase()
	r.progress("  %s: %d spans in %d requests, %d traces, sent to every deployment; waiting until each has analysed and stored them…",
		name, p.Sent.Spans, p.Sent.Requests, p.Sent.Traces)
	if err := r.waitStored(ctx, r.sending()); err != nil {
		return err
	}
	p.Figures, p.Gained, p.Telemetry = map[string]*Figures{}, map[string]Counts{}, map[string]Telemetry{}
	for _, d := range r.sending() {
		f, err := ReadFigures(ctx, r.stores[d])
		if err != nil {
			return err
		}
		p.Figures[d] = f
		var before Counts
		if prev != nil {
			before = prev.Figures[d].Counts()
		}
		p.Gained[d] = f.Counts().Minus(before)
	}
	for _, c := range r.all {
		if !c.Running() {
			continue
		}
		t, err := readTelemetry(c.Process)
		if err != nil {
			return err
		}
		p.Telemetry[c.Name()] = t
	}
	r.progress("  %s: analysed and stored everywhere", name)
	return nil
}

// waitStored waits until the deployments' stores hold everything they
// were sent: each store counts every inbound span as a request served (more
// is a double count, which the figures show), the collectors buffer no
// trace and hold no verdict, and what they analysed last is flushed and
// written. A trace part
// without an inbound span, as a handover can leave, counts no request, but
// must not land in the next phase's figures.
func (r *run) waitStored(ctx context.Context, deployments []string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute+3*r.o.Timings.DecisionWait)
	defer cancel()
	var err error
	var progress []string
	stored := func() bool {
		progress = progress[:0]
		all := true
		for _, d := range deployments {
			want := int64(r.tee.Total(d).Inbound)
			var rows []store.Amplification
			if rows, err = r.stores[d].Amplification(ctx, time.Unix(0, 0), time.Now().Add(24*time.Hour)); err != nil {
				return false
			}
			var got int64
			for _, a := range rows {
				got += a.Seen.Served
			}
			progress = append(progress, fmt.Sprintf("%s counts %d of %d", d, got, want))
			all = all && got >= want
		}
		return all
	}
	// gauge sums a gauge over the deployments' analysing collectors.
	gauge := func(name string) float64 {
		sum := 0.0
		for _, d := range deployments {
			for _, c := range r.deployed[d] {
				if c.HintsAddr == "" || !c.Running() {
					continue
				}
				v, gerr := c.Metric(name)
				if gerr != nil {
					err = gerr
					return -1
				}
				sum += v
			}
		}
		return sum
	}
	for _, stage := range []struct {
		what  string
		until func() bool
	}{
		{"every store to count each inbound span it was sent as a request served", stored},
		{"the collectors to buffer no trace", func() bool { return gauge("otelcol_processor_errorownership_buffer_traces") == 0 }},
		{"the collectors to hold no verdict", func() bool {
			// A verdict that rested on an edge without a mode is held until
			// the model gives it one (rejudge), then counted in its trace's
			// bucket: it belongs to this phase's figures.
			held := gauge("otelcol_processor_errorownership_verdicts_held")
			return held >= 0 && held == gauge("otelcol_processor_errorownership_verdicts_rejudged")
		}},
		{"the last traces' flush", func() bool {
			// The analysis of the last traces goes out with the next flush
			// (flush_interval 1s).
			sleepUntil(ctx, time.Now().Add(2*time.Second))
			return true
		}},
		{"the collectors to write what they flushed", func() bool { return gauge("otelcol_processor_errorownership_store_rows_pending") == 0 }},
	} {
		for !stage.until() {
			if err := r.crashed(); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waited a minute for %s (%s): %w", stage.what, strings.Join(progress, ", "), errors.Join(err, ctx.Err()))
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// traffic sends the warm-up's, the measured or the scaled phase's
// traffic: the chain of docs/design.md §1 under each retry policy, then the checkout
// scenario. The services listen on new ports each time, which only adds
// addresses to the hints: a port they held before may be a collector's
// now.
func (r *run) traffic(ctx context.Context) error {
	o := r.o
	run := func(top *simulation.Topology, p simulation.Policy, route string, n int) error {
		_, err := simulation.Run(ctx, simulation.RunConfig{Topology: top, Policy: p, Route: route,
			OTLPEndpoint: r.tee.URL, Requests: n, Concurrency: 4, BudgetRatio: simulation.BudgetRatio, Seed: o.Seed})
		if err != nil {
			return fmt.Errorf("%s (%s): %w", route, p, err)
		}
		return nil
	}
	for _, p := range simulation.ChainPolicies {
		if err := run(simulation.Chain(), p, "/chain/"+string(p), o.ChainRequests); err != nil {
			return err
		}
	}
	return run(simulation.Checkout(), simulation.Ownership, "/checkout", o.CheckoutRequests)
}

// rebalance sends the chain under retry_every_hop and the checkout
// scenario at a steady rate for Options.Rebalance, and meanwhile stops the
// last analysis collector with SIGTERM (after a quarter of it) and starts
// a new one (after half).
func (r *run) rebalance(ctx context.Context) error {
	o := r.o
	secs := o.Rebalance.Seconds()
	type flow struct {
		top   *simulation.Topology
		p     simulation.Policy
		route string
		rate  float64
	}
	flows := []flow{
		{simulation.Chain(), simulation.RetryEveryHop, "/chain/" + string(simulation.RetryEveryHop), 10},
		{simulation.Checkout(), simulation.Ownership, "/checkout", 60},
	}
	r.progress("  rebalance: the chain (retry_every_hop) at %.0f and checkout at %.0f root requests a second for %v",
		flows[0].rate, flows[1].rate, o.Rebalance)
	start := time.Now()
	errs := make([]error, len(flows))
	var wg sync.WaitGroup
	for i, f := range flows {
		wg.Go(func() {
			_, errs[i] = simulation.Run(ctx, simulation.RunConfig{Topology: f.top, Policy: f.p, Route: f.route,
				OTLPEndpoint: r.tee.URL, Requests: int(f.rate * secs), Concurrency: 4, Rate: f.rate,
				BudgetRatio: simulation.BudgetRatio, Seed: o.Seed + 1})
		})
	}
	handover := func() error {
		h := &r.rep.Handover
		sleepUntil(ctx, start.Add(o.Rebalance/4))
		analysers := r.analysers()
		stopped := analysers[len(analysers)-1]
		t, err := readTelemetry(stopped.Process)
		if err != nil {
			return err
		}
		h.Stopped, h.Moved = stopped.Name(), t.Partitions
		r.progress("  rebalance: SIGTERM to %s, which consumes %.0f partitions", h.Stopped, h.Moved)
		signalled := time.Now()
		r.stopped[stopped] = true
		if err := stopped.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		type exit struct {
			err error
			at  time.Time
		}
		exited := make(chan exit, 1)
		go func() {
			err := stopped.Wait(time.Minute)
			exited <- exit{err, time.Now()}
		}()
		if _, err := r.waitPartitions(ctx, analysers[:len(analysers)-1], nil); err != nil {
			return err
		}
		h.TakenOver = time.Since(signalled)
		e := <-exited
		if e.err != nil {
			return fmt.Errorf("%s after SIGTERM: %w", h.Stopped, e.err)
		}
		h.StopTook = e.at.Sub(signalled)
		r.progress("  rebalance: %s exited %v after the SIGTERM; the others consumed all %d partitions %v after it; %s",
			h.Stopped, h.StopTook.Round(time.Millisecond), o.Partitions, h.TakenOver.Round(time.Millisecond), r.partitionLine())

		sleepUntil(ctx, start.Add(o.Rebalance/2))
		h.Joined = r.nextAnalyser()
		r.progress("  rebalance: starting %s", h.Joined)
		if h.StartTook, h.JoinTook, err = r.join(ctx, h.Joined); err != nil {
			return err
		}
		r.progress("  rebalance: %s consumes its share %v after it was started (%v to start); %s",
			h.Joined, h.JoinTook.Round(time.Millisecond), h.StartTook.Round(time.Millisecond), r.partitionLine())
		return nil
	}
	herr := handover()
	wg.Wait()
	return errors.Join(herr, errors.Join(errs...))
}

// join starts another analysis collector and waits until it consumes its
// share of the partitions. It returns how long after it was started its
// health check answered, and it consumed.
func (r *run) join(ctx context.Context, name string) (started, consumes time.Duration, err error) {
	begun := time.Now()
	c, err := r.launch.analysis(ctx, name, r.broker.Addr, r.dsn(Kafka))
	if err != nil {
		return 0, 0, err
	}
	started = time.Since(begun)
	r.all = append(r.all, c)
	r.deployed[Kafka] = append(r.deployed[Kafka], c)
	r.rep.Collectors[Kafka] = append(r.rep.Collectors[Kafka], name)
	if _, err := r.waitPartitions(ctx, r.analysers(), c); err != nil {
		return 0, 0, err
	}
	return started, time.Since(begun), nil
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

// waitPartitions waits until the collectors consume every partition
// between them, each some (newcomer at least one), and returns how long
// that took.
func (r *run) waitPartitions(ctx context.Context, cs []*Collector, newcomer *Collector) (time.Duration, error) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		total, each := 0.0, true
		for _, c := range cs {
			t, err := readTelemetry(c.Process)
			each = each && err == nil && (t.Partitions > 0 || (newcomer != nil && c != newcomer))
			total += t.Partitions
		}
		if each && total == float64(r.o.Partitions) {
			return time.Since(begin), nil
		}
		if err := r.crashed(); err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the analysis collectors consume %.0f of %d partitions after a minute (%s)", total, r.o.Partitions, r.partitionLine())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// partitionLine says how many partitions each analysis collector consumes.
func (r *run) partitionLine() string {
	var parts []string
	for _, c := range r.analysers() {
		t, err := readTelemetry(c.Process)
		if err != nil {
			parts = append(parts, c.Name()+": ?")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %.0f partitions", c.Name(), t.Partitions))
	}
	return strings.Join(parts, ", ")
}

// waitHints waits until every analysing collector serves, for every
// service, the hints its store's edge model gives: it has read the whole
// model back, and judges by it. With a phase, it records what each served
// there.
func (r *run) waitHints(ctx context.Context, keep *Phase) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if keep != nil {
		keep.Hints = map[string]map[string]*ownership.Hints{}
	}
	for _, d := range r.sending() {
		model, err := r.stores[d].EdgeModel(ctx, time.Unix(0, 0), 0, ModelConfig())
		if err != nil {
			return err
		}
		want := map[string][]ownership.HintEdge{}
		for _, e := range model {
			want[e.Service] = append(want[e.Service], e.HintEdge(e.Operation, e.PeerService, e.PeerOperation, e.PeerAddresses))
		}
		services := map[string]bool{}
		for _, a := range r.rep.Warmup.Figures[d].Services {
			services[a.Service] = true
		}
		for _, c := range r.deployed[d] {
			if c.HintsAddr == "" || !c.Running() {
				continue
			}
			for svc := range services {
				for {
					doc, err := fetchHints(ctx, c.HintsAddr, svc)
					if err := r.crashed(); err != nil {
						return err
					}
					if err == nil && sameEdges(doc.Edges, want[svc]) {
						if keep != nil {
							if keep.Hints[c.Name()] == nil {
								keep.Hints[c.Name()] = map[string]*ownership.Hints{}
							}
							keep.Hints[c.Name()][svc] = doc
						}
						break
					}
					select {
					case <-ctx.Done():
						return fmt.Errorf("%s never served %s the hints of its store's edge model (%w)", c.Name(), svc, errors.Join(err, ctx.Err()))
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		}
	}
	r.progress("  every analysing collector serves the hints of its store's whole edge model")
	return nil
}

// fetchHints gets a service's hints, generated_at cleared.
func fetchHints(ctx context.Context, addr, service string) (*ownership.Hints, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+ownership.HintsPath+"?service="+url.QueryEscape(service), nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("hints for %s: %s", service, res.Status)
	}
	var doc ownership.Hints
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		return nil, err
	}
	doc.GeneratedAt = time.Time{}
	return &doc, nil
}

// sameEdges reports whether two services' edges are the same, in any order.
func sameEdges(a, b []ownership.HintEdge) bool {
	enc := func(edges []ownership.HintEdge) string {
		if len(edges) == 0 {
			return "[]"
		}
		edges = slices.Clone(edges)
		slices.SortFunc(edges, func(x, y ownership.HintEdge) int {
			return cmp.Or(strings.Compare(x.Operation, y.Operation), strings.Compare(x.PeerService, y.PeerService),
				strings.Compare(x.PeerOperation, y.PeerOperation))
		})
		b, _ := json.Marshal(edges)
		return string(b)
	}
	return enc(a) == enc(b)
}

// deliveries reads the spans every analysis collector passed on to its
// file exporter and accounts for every span the front tier was sent.
func (r *run) deliveries() error {
	h := &r.rep.Handover
	h.Delivered = map[string]int{}
	sent := r.tee.spans(Kafka)
	seen := make(map[spanKey]int, len(sent))
	by := make(map[[16]byte]map[string]bool) // trace → collectors
	for _, c := range r.deployed[Kafka] {
		if c.Exported == "" {
			continue
		}
		if _, err := os.Stat(c.Exported); errors.Is(err, os.ErrNotExist) {
			continue // it consumed nothing
		}
		err := otlpfile.ReadFile(c.Exported, func(td ptrace.Traces) {
			for _, rs := range td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, sp := range ss.Spans().All() {
						h.Delivered[c.Name()]++
						seen[spanKey{sp.TraceID(), sp.SpanID()}]++
						m := by[sp.TraceID()]
						if m == nil {
							m = map[string]bool{}
							by[sp.TraceID()] = m
						}
						m[c.Name()] = true
					}
				}
			}
		})
		if err != nil {
			return err
		}
	}
	for k, n := range seen {
		if n > 1 {
			h.Duplicates++
		}
		if _, ok := sent[k]; !ok {
			return fmt.Errorf("an analysis collector passed on a span the front tier was never sent (trace %x)", k.trace)
		}
	}
	for k := range sent {
		if seen[k] == 0 {
			h.Missing++
		}
	}
	for trace := range r.rep.Rebalanced.traces {
		h.Traces++
		if len(by[trace]) > 1 {
			h.Split++
		}
	}
	r.progress("every span the front tier was sent was passed on by the analysis collectors %s: %d duplicates, %d missing",
		fmtCounts(h.Delivered), h.Duplicates, h.Missing)
	return nil
}

func fmtCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
