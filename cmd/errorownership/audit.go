// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/errorownership/errorownership/store"
)

// exitShareAbove is audit's exit status when --fail-if-share-above trips:
// distinct from 1 (the command failed) so that a CI step or an alert can
// tell "too many coincidental errors" from "could not look".
const exitShareAbove = 3

type auditOptions struct {
	db        storeFlags
	win       windowFlags
	filter    store.AuditFilter
	view      string
	format    string
	traceURL  string
	failAbove string
}

func newAuditCommand() *cobra.Command {
	var o auditOptions
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List coincidental errors: own failures that coincided with a tolerated dependency failing",
		Long: `audit answers, from the store: which errors were coincidental, on which services, with
which dependency — a service failed for its own reason while a dependency it tolerates
(a fail-open edge) failed too (docs/design.md §2, §4.2). Such an error is the service's
own and claimed; counted as the dependency's, it would hide the service's own failures.

The grouped view (the default) counts them per service and failed dependency, as a share
of the service's failed requests. The detail view lists each one with its trace ID, and a
link when --trace-url gives a template. The audit log keeps at most
store.audit_per_service_per_minute entries per service and minute; a service's exact
count of coincidental errors is shown beside it.

With --fail-if-share-above, the exit status is 3 when any service's share of coincidental
errors with one dependency is above the limit: a check for CI or alerting.`,
		Example: `  # Coincidental errors of the last hour, per service and dependency
  errorownership audit --dsn postgres://reader@db.internal:5432/errorownership

  # Each coincidental error of checkout over a night, with links to the trace backend
  errorownership audit --service checkout --from "2026-11-29 22:00" --to "2026-11-30 06:00" \
      --view detail --trace-url 'https://grafana.internal/explore?traceId={trace_id}'

  # As CSV for a spreadsheet, or JSON for jq
  errorownership audit --since 24h --format csv > coincidental.csv
  errorownership audit --since 24h --view detail --format json | jq -r '.errors[].trace_id'

  # Fail a pipeline when over 5 % of a service's failures coincide with a dependency's
  errorownership audit --since 15m --fail-if-share-above 5%`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	o.db.add(f)
	o.win.add(f, time.Hour)
	f.StringVar(&o.filter.Service, "service", "", "only this service's coincidental errors")
	f.StringVar(&o.filter.Operation, "operation", "", "only those of this inbound operation (such as \"POST /checkout\")")
	f.StringVar(&o.filter.PeerService, "dependency", "", "only those in which this dependency (peer service) failed")
	f.StringVar(&o.view, "view", "grouped", "grouped: counts per service and dependency; detail: each error with its trace ID")
	f.StringVar(&o.format, "format", "table", "table, json or csv")
	f.StringVar(&o.traceURL, "trace-url", "", "link template for the detail view, with {trace_id}, {span_id}, {service}, {operation}, {time} (RFC 3339) or {time_ms} (Unix milliseconds)")
	f.IntVar(&o.filter.Limit, "limit", 1000, "detail view: list at most this many errors, oldest first (0: all)")
	f.StringVar(&o.failAbove, "fail-if-share-above", "", "exit with status 3 if a service's share of coincidental errors with one dependency is above this (0.05 or 5%)")
	completeFixed(cmd, "view", "grouped", "detail")
	completeFixed(cmd, "format", "table", "json", "csv")
	completeNames(cmd, &o.db, &o.win, "service", func(n *store.Names) []string { return n.Services })
	completeNames(cmd, &o.db, &o.win, "dependency", func(n *store.Names) []string { return n.Peers })
	completeNames(cmd, &o.db, &o.win, "operation", func(n *store.Names) []string { return n.Operations[o.filter.Service] })
	return cmd
}

func (o *auditOptions) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	if o.view != "grouped" && o.view != "detail" {
		return fmt.Errorf("--view %q: use grouped or detail", o.view)
	}
	if o.format != "table" && o.format != "json" && o.format != "csv" {
		return fmt.Errorf("--format %q: use table, json or csv", o.format)
	}
	if o.filter.Limit < 0 {
		return fmt.Errorf("--limit %d: use 0 for every error, or a positive number", o.filter.Limit)
	}
	link, err := parseTraceURL(o.traceURL)
	if err != nil {
		return err
	}
	limit, err := parseShare(o.failAbove)
	if err != nil {
		return err
	}
	from, to, err := o.win.window(cmd.Flags(), time.Now())
	if err != nil {
		return err
	}
	o.filter.From, o.filter.To = from, to
	st, err := o.db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := o.checkNames(ctx, st); err != nil {
		return err
	}

	groups, err := st.AuditGroups(ctx, o.filter)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.view == "grouped" {
		err = o.writeGroups(out, groups)
	} else {
		err = o.writeDetail(ctx, cmd, st, link)
	}
	if err != nil {
		return err
	}
	if limit != nil {
		var above []string
		for _, g := range groups {
			if g.Failed > 0 && g.Share() > *limit {
				above = append(above, fmt.Sprintf("%s with %s: %.1f%% of %s failed requests", g.Service, g.PeerService, 100*g.Share(), figure(g.Failed)))
			}
		}
		if len(above) > 0 {
			return &exitError{code: exitShareAbove, err: fmt.Errorf("coincidental errors above --fail-if-share-above %s: %s", o.failAbove, strings.Join(above, "; "))}
		}
	}
	return nil
}

// checkNames makes a misspelt filter an error that names the near names
// rather than an empty answer, and an empty window one that says where the
// data is.
func (o *auditOptions) checkNames(ctx context.Context, st *store.Store) error {
	names, err := windowNames(ctx, st, o.filter.From, o.filter.To)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("from %s to %s", stamp(o.filter.From), stamp(o.filter.To))
	if s := o.filter.Service; s != "" && !slices.Contains(names.Services, s) {
		return unknownName("service", "--service", s, names.Services, where)
	}
	if p := o.filter.PeerService; p != "" && !slices.Contains(names.Peers, p) {
		return unknownName("dependency", "--dependency", p, names.Peers, where)
	}
	if op := o.filter.Operation; op != "" {
		var ops []string
		for svc, list := range names.Operations {
			if o.filter.Service == "" || svc == o.filter.Service {
				ops = append(ops, list...)
			}
		}
		slices.Sort(ops)
		ops = slices.Compact(ops)
		if !slices.Contains(ops, op) {
			return unknownName("operation", "--operation", op, ops, where)
		}
	}
	return nil
}

// auditGroupLine is a grouped row as JSON and CSV write it. The figures
// are estimates of all traffic (each audit entry weighing its trace's
// adjusted count), the counts seen beside them in the _seen fields.
type auditGroupLine struct {
	Service      string  `json:"service"`
	Dependency   string  `json:"dependency"`
	Coincidental float64 `json:"coincidental"`
	// Share is Coincidental over ServiceFailed, null without failed requests.
	Share                   *float64 `json:"share"`
	ServiceFailed           float64  `json:"service_failed"`
	ServiceCoincidental     float64  `json:"service_coincidental"`
	First                   string   `json:"first"`
	Last                    string   `json:"last"`
	CoincidentalSeen        int64    `json:"coincidental_seen"`
	ServiceFailedSeen       int64    `json:"service_failed_seen"`
	ServiceCoincidentalSeen int64    `json:"service_coincidental_seen"`
	// Sampling is how the audit entries were counted: counted,
	// extrapolated or mixed.
	Sampling string `json:"sampling"`
}

func groupLine(g *store.AuditGroup) auditGroupLine {
	l := auditGroupLine{Service: g.Service, Dependency: g.PeerService, Coincidental: g.Audited,
		ServiceFailed: g.Failed, ServiceCoincidental: g.Coincidental, First: stamp(g.First), Last: stamp(g.Last),
		CoincidentalSeen: g.Seen.Audited, ServiceFailedSeen: g.Seen.Failed, ServiceCoincidentalSeen: g.Seen.Coincidental,
		Sampling: g.Sampling.String()}
	if g.Failed > 0 {
		s := g.Share()
		l.Share = &s
	}
	return l
}

func (o *auditOptions) writeGroups(w io.Writer, groups []store.AuditGroup) error {
	switch o.format {
	case "json":
		lines := make([]auditGroupLine, 0, len(groups))
		for i := range groups {
			lines = append(lines, groupLine(&groups[i]))
		}
		return writeJSON(w, struct {
			From   string           `json:"from"`
			To     string           `json:"to"`
			Groups []auditGroupLine `json:"groups"`
		}{stamp(o.filter.From), stamp(o.filter.To), lines})
	case "csv":
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"service", "dependency", "coincidental", "share", "service_failed", "service_coincidental", "first", "last",
			"coincidental_seen", "service_failed_seen", "service_coincidental_seen", "sampling"})
		for i := range groups {
			l := groupLine(&groups[i])
			share := ""
			if l.Share != nil {
				share = strconv.FormatFloat(*l.Share, 'f', -1, 64)
			}
			_ = cw.Write([]string{l.Service, l.Dependency, strconv.FormatFloat(l.Coincidental, 'f', -1, 64), share,
				strconv.FormatFloat(l.ServiceFailed, 'f', -1, 64), strconv.FormatFloat(l.ServiceCoincidental, 'f', -1, 64), l.First, l.Last,
				strconv.FormatInt(l.CoincidentalSeen, 10), strconv.FormatInt(l.ServiceFailedSeen, 10),
				strconv.FormatInt(l.ServiceCoincidentalSeen, 10), l.Sampling})
		}
		cw.Flush()
		return cw.Error()
	}
	fmt.Fprintf(w, "Coincidental errors from %s to %s%s\n", stamp(o.filter.From), stamp(o.filter.To), o.filterText())
	if len(groups) == 0 {
		fmt.Fprintln(w, "none: no service failed on its own while a dependency it tolerates failed too")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tDEPENDENCY\tCOINCIDENTAL\tOF FAILED\tSHARE\tSAMPLING\tFIRST\tLAST")
	audited := map[string]int64{}
	for i := range groups {
		g := &groups[i]
		share := "n/a"
		if g.Failed > 0 {
			share = fmt.Sprintf("%.1f%%", 100*g.Share())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Service, g.PeerService, figureSeen(g.Audited, g.Seen.Audited),
			figureSeen(g.Failed, g.Seen.Failed), share, g.Sampling, stamp(g.First), stamp(g.Last))
		audited[g.Service] += g.Seen.Audited
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.filter.PeerService == "" {
		for i := range groups {
			g := &groups[i]
			// Entries seen against requests seen: the log's bound is
			// on entries, whatever they weigh.
			if n := audited[g.Service]; n < g.Seen.Coincidental {
				fmt.Fprintf(w, "(%s: %d coincidental errors, %d in the audit log, which keeps at most store.audit_per_service_per_minute a minute)\n", g.Service, g.Seen.Coincidental, n)
				audited[g.Service] = g.Seen.Coincidental // once per service
			}
		}
	}
	return nil
}

func (o *auditOptions) filterText() string {
	var parts []string
	for _, p := range [][2]string{{"service", o.filter.Service}, {"operation", o.filter.Operation}, {"dependency", o.filter.PeerService}} {
		if p[1] != "" {
			parts = append(parts, fmt.Sprintf("%s %q", p[0], p[1]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", ")
}

// auditErrorLine is a detail row as JSON and CSV write it.
type auditErrorLine struct {
	Time                string `json:"time"`
	TraceID             string `json:"trace_id"`
	SpanID              string `json:"span_id"`
	Service             string `json:"service"`
	Operation           string `json:"operation"`
	Dependency          string `json:"dependency"`
	DependencyOperation string `json:"dependency_operation"`
	ClaimSent           string `json:"claim_sent"`
	ClaimExpected       string `json:"claim_expected"`
	// Weight is the adjusted count of the error's trace: how many
	// coincidental errors of all traffic the entry stands for.
	Weight float64 `json:"weight"`
	Link   string  `json:"link,omitempty"`
}

func (o *auditOptions) writeDetail(ctx context.Context, cmd *cobra.Command, st *store.Store, link func(*store.AuditRecord) string) error {
	f := o.filter
	if f.Limit > 0 {
		f.Limit++ // one more, to tell whether some were left out
	}
	recs, err := st.AuditEntries(ctx, f)
	if err != nil {
		return err
	}
	truncated := o.filter.Limit > 0 && len(recs) > o.filter.Limit
	if truncated {
		recs = recs[:o.filter.Limit]
		fmt.Fprintf(cmd.ErrOrStderr(), "errorownership audit: listing the first %d coincidental errors; --limit 0 lists all, or narrow the window\n", o.filter.Limit)
	}
	lines := make([]auditErrorLine, len(recs))
	for i := range recs {
		r := &recs[i]
		lines[i] = auditErrorLine{Time: r.Time.Format(time.RFC3339Nano), TraceID: r.TraceID, SpanID: r.SpanID,
			Service: r.Service, Operation: r.Operation, Dependency: r.PeerService, DependencyOperation: r.PeerOperation,
			ClaimSent: r.ClaimSent.String(), ClaimExpected: r.ClaimExpected.String(), Weight: r.Weight}
		if link != nil {
			lines[i].Link = link(r)
		}
	}
	w := cmd.OutOrStdout()
	switch o.format {
	case "json":
		return writeJSON(w, struct {
			From      string           `json:"from"`
			To        string           `json:"to"`
			Errors    []auditErrorLine `json:"errors"`
			Truncated bool             `json:"truncated"`
		}{stamp(o.filter.From), stamp(o.filter.To), lines, truncated})
	case "csv":
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"time", "trace_id", "span_id", "service", "operation", "dependency", "dependency_operation", "claim_sent", "claim_expected", "link", "weight"})
		for _, l := range lines {
			_ = cw.Write([]string{l.Time, l.TraceID, l.SpanID, l.Service, l.Operation, l.Dependency, l.DependencyOperation, l.ClaimSent, l.ClaimExpected, l.Link,
				strconv.FormatFloat(l.Weight, 'f', -1, 64)})
		}
		cw.Flush()
		return cw.Error()
	}
	fmt.Fprintf(w, "Coincidental errors from %s to %s%s\n", stamp(o.filter.From), stamp(o.filter.To), o.filterText())
	if len(lines) == 0 {
		fmt.Fprintln(w, "none: no service failed on its own while a dependency it tolerates failed too")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "TIME\tTRACE ID\tSPAN ID\tSERVICE\tOPERATION\tDEPENDENCY\tDEPENDENCY OPERATION\tCLAIM SENT\tWEIGHT"
	if link != nil {
		header += "\tLINK"
	}
	fmt.Fprintln(tw, header)
	for i, l := range lines {
		// Milliseconds, always written, so that the column lines up.
		at := recs[i].Time.Format("2006-01-02T15:04:05.000Z07:00")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", at, l.TraceID, l.SpanID, l.Service, l.Operation, l.Dependency, l.DependencyOperation, l.ClaimSent, figure(l.Weight))
		if link != nil {
			fmt.Fprintf(tw, "\t%s", l.Link)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// traceURLFields are the placeholders --trace-url knows.
var traceURLFields = map[string]func(*store.AuditRecord) string{
	"trace_id":  func(r *store.AuditRecord) string { return r.TraceID },
	"span_id":   func(r *store.AuditRecord) string { return r.SpanID },
	"service":   func(r *store.AuditRecord) string { return r.Service },
	"operation": func(r *store.AuditRecord) string { return r.Operation },
	"time":      func(r *store.AuditRecord) string { return r.Time.Format(time.RFC3339Nano) },
	"time_ms":   func(r *store.AuditRecord) string { return strconv.FormatInt(r.Time.UnixMilli(), 10) },
}

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// parseTraceURL checks a --trace-url template and returns what fills it in
// (nil without a template). Values are query-escaped: a service name may
// hold anything.
func parseTraceURL(tmpl string) (func(*store.AuditRecord) string, error) {
	if tmpl == "" {
		return nil, nil
	}
	hasTrace := false
	for _, p := range placeholder.FindAllString(tmpl, -1) {
		name := strings.Trim(p, "{}")
		if traceURLFields[name] == nil {
			return nil, fmt.Errorf("--trace-url: unknown placeholder %s; use {trace_id}, {span_id}, {service}, {operation}, {time} or {time_ms}", p)
		}
		hasTrace = hasTrace || name == "trace_id"
	}
	if !hasTrace {
		return nil, fmt.Errorf("--trace-url %q has no {trace_id}: write where a trace is shown, such as 'https://grafana.internal/explore?traceId={trace_id}'", tmpl)
	}
	return func(r *store.AuditRecord) string {
		return placeholder.ReplaceAllStringFunc(tmpl, func(p string) string {
			return url.QueryEscape(traceURLFields[strings.Trim(p, "{}")](r))
		})
	}, nil
}

// parseShare reads --fail-if-share-above: a fraction (0.05) or a
// percentage (5%); nil when not given.
func parseShare(s string) (*float64, error) {
	if s == "" {
		return nil, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err == nil && strings.HasSuffix(s, "%") {
		v /= 100
	}
	if err != nil || !(v >= 0 && v <= 1) {
		return nil, fmt.Errorf("--fail-if-share-above %q: give a share between 0 and 1 (0.05) or a percentage (5%%)", s)
	}
	return &v, nil
}

// writeJSON writes v indented, as people read it and jq takes it.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// figure writes an estimate of all traffic: a whole number as such (every
// counted figure is one), else to two decimal places.
func figure(v float64) string {
	if r := math.Round(v); math.Abs(v-r) < 1e-6 {
		return strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// figureSeen writes an estimate with the count seen beside it where the
// two differ: where the figure was extrapolated from sampled traces.
func figureSeen(est float64, seen int64) string {
	if math.Abs(est-float64(seen)) < 1e-6 {
		return figure(est)
	}
	return fmt.Sprintf("%s (%d seen)", figure(est), seen)
}
