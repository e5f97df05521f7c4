// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The targets the figures are measured against.
var (
	targetSpanmetrics  = atLeast(2, "2")
	targetGroupbytrace = atLeast(20, "20")
	targetBufferedOurs = atMost(67, "67 B")
	targetBufferedVs   = atMost(1.0/8, "⅛")
	targetMarshalRatio = atLeast(0.75, "0.75")
	targetMarshalExtra = atMost(100, "100 ns")
	targetFullRatio    = atLeast(0.95, "0.95")
	// The growth curves: a point's CPU per span against a reference
	// point's, round by round.
	targetFlat = atMost(1.5, "1.5")
)

// flatTargets are the growth curves' targets: the CPU per span at point x
// at most targetFlat times that at point of.
var flatTargets = []struct {
	curve string
	x, of float64
	what  string
}{
	{"trace-size", 1, 1_000, "one-span traces against traces of 1,000 spans"},
	{"edges", 1_000_000, 1_000, "1,000,000 distinct edges against 1,000"},
}

// machine describes where the figures were measured.
type machine struct {
	CPU, Kernel, Go         string
	Cores                   int
	Date                    time.Time
	LoadBefore, LoadAfter   string
	Taskset                 bool
	Duration                time.Duration
	SpansPerSet, Sets, Runs int
}

// report is RESULTS.md: the tables of both core settings, the growth
// curves and the machine.
func report(m machine, settings []*childResults, rounds int) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Side by side: errorownership, spanmetrics, groupbytrace, no-op\n\n")
	p("Written by `make bench-peers` (see [README.md](README.md) for what each figure is and how it is measured).\n")
	p("Every figure is the median of %d rounds with the range [min–max]; within a round the contenders run one after\n", rounds)
	p("the other on the same batches, their order rotated from round to round. A target holds when the median meets it.\n\n")
	p("Machine: %s, %d cores, %s, Linux %s; %s. Load average before: %s, after: %s.\n",
		m.CPU, m.Cores, m.Go, m.Kernel, m.Date.UTC().Format("2006-01-02 15:04 MST"), m.LoadBefore, m.LoadAfter)
	pin := "pinned to CPU 0 with taskset"
	if !m.Taskset {
		pin = "not pinned (no taskset)"
	}
	p("One core: GOMAXPROCS=1, %s. All cores: GOMAXPROCS=%d. Workload: %d sets of %d spans (scenario.Mix), %d runs in all; %s in all.\n\n",
		pin, m.Cores, m.Sets, m.SpansPerSet, m.Runs, m.Duration.Round(time.Second))
	for _, section := range []func(*strings.Builder, machine, []*childResults){
		reportThroughput, reportAllocations, reportBuffered, reportPipelines, reportCurves, reportProfiles, reportNotes,
	} {
		section(&b, m, settings)
	}
	return b.String()
}

// reportThroughput is the throughput table and its ratios.
func reportThroughput(b *strings.Builder, m machine, settings []*childResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Throughput: spans per CPU-second\n\n")
	p("Process CPU time (user + system, every thread) over feeding a run's %s spans and shutting the component down,\n", rate(float64(m.SpansPerSet)))
	p("less the decoding of the batches. Ratios are per round, then summarised.\n\n")
	t := table{header: []string{"shape", "cores", ours, spanmetrics, groupbytrace, nop,
		"ours/spanmetrics (target " + targetSpanmetrics.text + ")", "ours/groupbytrace (target " + targetGroupbytrace.text + ")"}}
	for _, sh := range shapes {
		for _, s := range settings {
			runs := s.Runs[sh.key]
			rates := map[string][]float64{}
			for _, k := range contenderKeys {
				for _, r := range runs[k] {
					rates[k] = append(rates[k], r.spansPerCPUSecond())
				}
			}
			vsSM, vsGBT := summarize(ratios(rates[ours], rates[spanmetrics])), summarize(ratios(rates[ours], rates[groupbytrace]))
			t.add(sh.title, cores(s), summarize(rates[ours]).format(rate), summarize(rates[spanmetrics]).format(rate),
				summarize(rates[groupbytrace]).format(rate), summarize(rates[nop]).format(rate),
				vsSM.format(fixed(2))+" "+targetSpanmetrics.verdict(vsSM), vsGBT.format(fixed(1))+" "+targetGroupbytrace.verdict(vsGBT))
		}
	}
	p("%s\n", t.String())
}

// reportAllocations is the allocations and peak heap table.
func reportAllocations(b *strings.Builder, _ machine, settings []*childResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Allocations and peak heap\n\n")
	p("Heap allocations per span (`/gc/heap/allocs:objects` and `/gc/heap/tiny/allocs:objects`, less the decoding's) and the peak of the heap's objects\n")
	p("(`/memory/classes/heap/objects:bytes`, sampled every %v; decoded batches waiting to be fed included, which the no-op shows).\n\n", heapSampleEvery)
	t := table{header: []string{"shape", "cores", "allocs/span " + ours, spanmetrics, groupbytrace, nop, "peak heap " + ours, spanmetrics, groupbytrace, nop}}
	for _, sh := range shapes {
		for _, s := range settings {
			row := []string{sh.title, cores(s)}
			var heaps []string
			for _, k := range contenderKeys {
				var a, h []float64
				for _, r := range s.Runs[sh.key][k] {
					a = append(a, float64(r.AllocObjects)/float64(r.Spans))
					h = append(h, float64(r.PeakHeap))
				}
				row = append(row, summarize(a).format(fixed(2)))
				heaps = append(heaps, summarize(h).format(mib))
			}
			t.add(append(row, heaps...)...)
		}
	}
	p("%s\n", t.String())
}

// reportBuffered is the heap per buffered span.
func reportBuffered(b *strings.Builder, _ machine, settings []*childResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Heap per buffered span\n\n")
	p("%s spans fed with a wait of an hour, so that nothing is released; the live heap's growth (after two collections) per span.\n\n", rate(float64(bufferedSpans)))
	t := table{header: []string{"shape", "cores", ours + " (target " + targetBufferedOurs.text + ")", groupbytrace, "ours/groupbytrace (target " + targetBufferedVs.text + ")"}}
	for _, sh := range bufferedShapes {
		for _, s := range settings {
			o, g := s.Buffered[sh.key][ours], s.Buffered[sh.key][groupbytrace]
			so, sv := summarize(o), summarize(ratios(o, g))
			t.add(sh.title, cores(s), so.format(bytesFmt)+" "+targetBufferedOurs.verdict(so), summarize(g).format(bytesFmt),
				sv.format(reciprocal)+" "+targetBufferedVs.verdict(sv))
		}
	}
	p("%s\n", t.String())
}

// reportPipelines is the marshal-only and the full pipeline.
func reportPipelines(b *strings.Builder, _ machine, settings []*childResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## The pipeline's goroutine: marshal-only pipeline\n\n")
	p("No-op and ours, each before an exporter that only marshals to OTLP protobuf, given the same batches alternately;\n")
	p("CPU time of the calling thread. Throughput ratio ours/no-op and our extra CPU per span on that goroutine.\n\n")
	t := table{header: []string{"cores", "no-op, spans/CPU-s", ours, "ratio (target " + targetMarshalRatio.text + ")", "extra ns/span (target " + targetMarshalExtra.text + ")"}}
	for _, s := range settings {
		t.add(pipelineRow(s.MarshalOnly, cores(s), targetMarshalRatio, &targetMarshalExtra)...)
	}
	p("%s\n", t.String())

	p("## Full OTLP pipeline over loopback\n\n")
	p("OTLP/gRPC client → otlpreceiver → (ours | nothing) → otlpexporter (defaults: queue, gzip) → otlpreceiver → nop,\n")
	p("all in one process, the two pipelines given the same batches alternately; process CPU time from sending a batch\n")
	p("until it has arrived (our analysis, done at shutdown, shared out by spans). Everything in the process counts.\n\n")
	t = table{header: []string{"cores", "without, spans/CPU-s", "with ours", "ratio (target " + targetFullRatio.text + ")", "extra ns/span"}}
	for _, s := range settings {
		t.add(pipelineRow(s.Full, cores(s), targetFullRatio, nil)...)
	}
	p("%s\n", t.String())
}

// reportCurves is the growth curves, measured on one core.
func reportCurves(b *strings.Builder, _ machine, settings []*childResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	for _, s := range settings {
		if s.Curves == nil {
			continue
		}
		p("## Growth curves\n\n")
		p("Our CPU time per span (process CPU, less the decoding) on %s, decision_wait %v; median of %d repetitions\n", coresText(s), curveWait, curveRepeats)
		p("[min–max]. Each point feeds about %s spans after a warm-up that is analysed first, and is measured until every\n", rate(float64(curveSpans)))
		p("trace is analysed. The shutdown after it flushes the statistics of the warm-up and the point together, which a\n")
		p("collector does once a flush_interval over far more spans: its CPU is the *flush* column, not in the ns/span.\n")
		p("*Edges* is what the edge model held then (`edges`), *peak heap* the process's, decoded batches included.\n\n")
		for _, ft := range flatTargets {
			c := curveByKey(ft.curve)
			xi, oi := slices.Index(c.points, ft.x), slices.Index(c.points, ft.of)
			if xi < 0 || oi < 0 {
				continue
			}
			r := summarize(ratios(s.Curves[c.key][xi], s.Curves[c.key][oi]))
			p("- %s: %s per span (target %s) %s\n", ft.what, r.format(func(x float64) string { return fmt.Sprintf("%.2f×", x) }), targetFlat.text, targetFlat.verdict(r))
		}
		p("\n")
		for _, c := range curves {
			p("### %s\n\n![%s](%s)\n\n", c.title, c.title, svgName(c.key))
			t := table{header: []string{c.xLabel, "ns/span", "flush", "edges", "peak heap"}}
			for i, x := range c.points {
				t.add(fmt.Sprintf("%g", x), summarize(s.Curves[c.key][i]).format(fixed(0)),
					summarize(s.Curves[c.key+curveFlush][i]).format(func(x float64) string { return fmt.Sprintf("%.0f ms", x) }),
					rate(summarize(s.Curves[c.key+curveEdges][i]).Median),
					mib(summarize(s.Curves[c.key+curveHeap][i]).Median))
			}
			p("%s\n", t.String())
		}
	}
}

// reportNotes lists what the components did not do as meant.
func reportNotes(b *strings.Builder, _ machine, settings []*childResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var notes []string
	for _, s := range settings {
		for _, sh := range shapes {
			for _, k := range contenderKeys {
				for i, r := range s.Runs[sh.key][k] {
					for _, pr := range r.Problems {
						notes = append(notes, fmt.Sprintf("%s, %s, %s, round %d: %s", coresText(s), sh.title, k, i+1, pr))
					}
				}
			}
		}
		notes = append(notes, s.Notes...)
	}
	if len(notes) > 0 {
		p("## Notes\n\nWhat the components' own telemetry says they did not do as meant:\n\n")
		seen := map[string]int{}
		var order []string
		for _, n := range notes {
			if seen[n] == 0 {
				order = append(order, n)
			}
			seen[n]++
		}
		for _, n := range order {
			if seen[n] > 1 {
				n = fmt.Sprintf("%s (%d times)", n, seen[n])
			}
			p("- %s\n", n)
		}
		p("\n")
	}
}

// pipelineRow is a row of a with/without table: both throughputs, their
// ratio and the extra CPU per span, against ratio and extra targets.
func pipelineRow(rounds []pipelineRound, cores string, ratio target, extra *target) []string {
	var without, with, r, ns []float64
	for _, x := range rounds {
		without = append(without, float64(x.Spans)/x.Without.Seconds())
		with = append(with, float64(x.Spans)/x.With.Seconds())
		r = append(r, x.Without.Seconds()/x.With.Seconds())
		ns = append(ns, float64((x.With-x.Without).Nanoseconds())/float64(x.Spans))
	}
	sr, sn := summarize(r), summarize(ns)
	extraCell := sn.format(fixed(0))
	if extra != nil {
		extraCell += " " + extra.verdict(sn)
	}
	return []string{cores, summarize(without).format(rate), summarize(with).format(rate), sr.format(fixed(2)) + " " + ratio.verdict(sr), extraCell}
}

// ratios is a[i]/b[i] for each round measured in both.
func ratios(a, b []float64) []float64 {
	out := make([]float64, 0, min(len(a), len(b)))
	for i := range min(len(a), len(b)) {
		out = append(out, a[i]/b[i])
	}
	return out
}

func cores(s *childResults) string { return fmt.Sprint(s.GOMAXPROCS) }

// coresText is "one core" or "N cores".
func coresText(s *childResults) string {
	if s.GOMAXPROCS == 1 {
		return "one core"
	}
	return fmt.Sprintf("%d cores", s.GOMAXPROCS)
}

func bytesFmt(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.1f B", x)
}

// reciprocal formats a small ratio as 1/x.
func reciprocal(x float64) string { return fmt.Sprintf("1/%.1f", 1/x) }

func svgName(curve string) string { return "curve-" + curve + ".svg" }

// curveByKey returns the growth curve key.
func curveByKey(key string) curve {
	for _, c := range curves {
		if c.key == key {
			return c
		}
	}
	return curve{}
}

// profileColumns are the runs the profile table shows, in order.
var profileColumns = []struct {
	key, title string
	curve      string  // the growth curve, for a curve's point
	x          float64 // the point
}{
	{key: "whole", title: "whole traces"},
	{key: "whole-5s", title: "whole, 5 s wait"},
	{key: "spread", title: "spread"},
	{key: curveProfileKey("trace-size", 1), title: "1-span traces", curve: "trace-size", x: 1},
	{key: curveProfileKey("trace-size", 1_000), title: "1,000-span traces", curve: "trace-size", x: 1_000},
	{key: curveProfileKey("edges", 1_000), title: "1,000 edges", curve: "edges", x: 1_000},
	{key: curveProfileKey("edges", 1_000_000), title: "1,000,000 edges", curve: "edges", x: 1_000_000},
}

// measuredNs is the median CPU per span measured for a profile column: our
// side-by-side runs of its shape, or its growth-curve point.
func measuredNs(s *childResults, key, curve string, x float64) float64 {
	if curve == "" {
		var ns []float64
		for _, r := range s.Runs[key][ours] {
			ns = append(ns, float64(r.CPU.Nanoseconds())/float64(r.Spans))
		}
		return summarize(ns).Median
	}
	c := curveByKey(curve)
	if i := slices.Index(c.points, x); i >= 0 {
		return summarize(s.Curves[c.key][i]).Median
	}
	return math.NaN()
}

// reportProfiles is where our CPU goes, and what each target missed would
// take.
func reportProfiles(b *strings.Builder, _ machine, settings []*childResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	for _, s := range settings {
		if len(s.Profiles) == 0 {
			continue
		}
		p("## Where our CPU goes\n\n")
		p("After the measurements the one-core child runs our processor again under Go's CPU profiler, unmeasured: %d runs\n", profileRuns)
		p("of each side-by-side shape (set 0), and %d of each growth-curve point a flat target compares (the measured phase\n", profileRuns)
		p("only). Each sample counts in the first part found going up its stack from the leaf (an allocation or a map\n")
		p("look-up counts in the part that made it), the decoding and the profiler's own work are left out, and each\n")
		p("column's shares are scaled to the median CPU per span measured above for the same shape or point: ns/span.\n\n")
		header := []string{"part"}
		for _, c := range profileColumns {
			header = append(header, c.title)
		}
		t := table{header: header}
		names := make([]string, 0, len(cpuParts)+1)
		for _, part := range cpuParts {
			names = append(names, part.name)
		}
		names = append(names, otherPart)
		total := make([]float64, len(profileColumns))
		for _, name := range names {
			row := []string{name}
			for i, c := range profileColumns {
				split, ok := s.Profiles[c.key]
				v := split[name] * measuredNs(s, c.key, c.curve, c.x)
				if !ok || math.IsNaN(v) {
					row = append(row, "–")
					continue
				}
				total[i] += v
				row = append(row, fmt.Sprintf("%.0f", v))
			}
			t.add(row...)
		}
		row := []string{"**all**"}
		for i, v := range total {
			if _, ok := s.Profiles[profileColumns[i].key]; !ok || v == 0 {
				row = append(row, "–")
				continue
			}
			row = append(row, fmt.Sprintf("**%.0f**", v))
		}
		t.add(row...)
		p("%s\n", t.String())
		p("A sample rate of 1 kHz over runs of a few tenths of a second leaves a few hundred samples a column: parts\n")
		p("under about 20 ns/span are within its grain. What stands between these figures and each target that misses:\n\n")
		for _, w := range wouldTake {
			p("- **%s**: %s\n", w.target, w.text)
		}
		p("\n")
	}
}

// wouldTake says, for each target, what stands between the figures above
// and it, read off the profile table's columns. It is prose, kept beside
// the table it reads.
var wouldTake = []struct{ target, text string }{
	{"≥ 2× spanmetrics", "twice spanmetrics' throughput puts all of our CPU per span at half of spanmetrics' " +
		"(10⁹ over its spans per CPU-second). Columns whole, whole 5 s and spread show where ours goes: extraction " +
		"(each span's fields and attributes read out of pdata, its names interned) and garbage collection (some of it " +
		"the decoded batches', which the no-op pays too) are the largest parts, then linking and judging and buffering. " +
		"spanmetrics reads a few attributes and updates a histogram a span, and less again when a batch holds one " +
		"service's spans, which is why spread is its best shape and our worst. Extraction reads each attribute once, " +
		"calling out only for those it reads, and buffering copies a batch's spans a run of a trace at a time; " +
		"most of what is left is reading spans and attributes scattered over pdata's heap, which it would take " +
		"reading less of each span to cut."},
	{"≥ 20× groupbytrace", "groupbytrace's CPU is mostly its own allocations (the allocations table); the ratio " +
		"follows ours, and reaches 20 only with the cuts above."},
	{"≤ 100 ns a span on the pipeline's goroutine", "the pipeline's goroutine runs extraction and buffering (their sum " +
		"in columns whole and spread is about the extra the marshal-only table measures); extraction is the larger. " +
		"Less would take extracting less a span, or handing the batch to the workers, which a processor that passes " +
		"it on may not do: the next consumer owns it then."},
	{"one-span traces ≤ 1.5×", "the 1-span column against the 1,000-span one: buffering, which each trace pays once " +
		"whatever its size — its slot in the trace table, its place in the queue, its entry, its look-up in the " +
		"late-span filter as it arrives and its entry there as it leaves, the table and the filter each a cache miss " +
		"once thousands of traces wait — and the garbage of a segment a trace (entries are recycled). The filter's " +
		"two look-ups are about a tenth of BenchmarkBuffer/one-span; keeping it in the trace table's slots would " +
		"save them, but would remember traces that left only as long as the table, sized by the traces waiting, " +
		"has room, where the filter has two slots per max_traces."},
	{"1,000,000 edges ≤ 1.5×", "the 1,000,000-edge column against the 1,000-edge one: the edge model and the " +
		"statistics. A call looks its edge up once, in the edge model's index, a table of 8-byte entries read just " +
		"before the edge's state; a request finds the edges from it and the depths under it through its operation's " +
		"entry in the bucket's statistics, not in tables of a million entries. What is left is mostly the cache and " +
		"TLB misses of those reads."},
}
