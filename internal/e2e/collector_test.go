package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/internal/scenario"
)

const repoRoot = "../.."

// buildCollector runs `make otelcol` and returns the binary's path. The
// build takes a minute or more when cold; make skips it when nothing changed.
func buildCollector(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("make", "otelcol")
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make otelcol:\n%s", out)
	bin, err := filepath.Abs(filepath.Join(repoRoot, "bin", "otelcol-errorownership"))
	require.NoError(t, err)
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type collector struct {
	grpcAddr, httpAddr, healthAddr, metricsAddr string
	outFile                                     string
	log                                         *bytes.Buffer
	cmd                                         *exec.Cmd
}

const configTemplate = `
extensions:
  health_check:
    endpoint: %[1]s
%[7]s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[2]s
      http:
        endpoint: %[3]s
processors:
  errorownership:
%[6]s
exporters:
  debug:
    verbosity: basic
  file:
    path: %[4]s
    format: json
service:
  extensions: [health_check%[8]s]
  telemetry:
    logs:
      level: info
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %[5]d
  pipelines:
    traces:
      receivers: [otlp]
      processors: [errorownership]
      exporters: [file, debug]
`

// defaultProcessor is the errorownership section of the tests that need
// no store.
const defaultProcessor = `    decision_wait: 300ms
    flush_interval: 1s
    edge_model:
      half_life: 0s`

func startCollector(t *testing.T, bin string) *collector {
	t.Helper()
	return startCollectorWith(t, bin, defaultProcessor)
}

// extension is an extension the collector runs beside health_check.
type extension struct {
	id     string // such as bearertokenauth/hints
	config string // indented by four spaces
}

// startCollectorWith starts the collector with the given errorownership
// section (indented by four spaces) and extensions, and waits for its
// health check.
func startCollectorWith(t *testing.T, bin, processorSection string, extensions ...extension) *collector {
	t.Helper()
	var extConfig, extIDs strings.Builder
	for _, e := range extensions {
		fmt.Fprintf(&extConfig, "  %s:\n%s\n", e.id, e.config)
		extIDs.WriteString(", " + e.id)
	}
	dir := t.TempDir()
	metricsPort := freePort(t)
	c := &collector{
		healthAddr:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		grpcAddr:    fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		httpAddr:    fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", metricsPort),
		outFile:     filepath.Join(dir, "out.json"),
		log:         &bytes.Buffer{},
	}
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, configTemplate, c.healthAddr, c.grpcAddr, c.httpAddr, c.outFile, metricsPort, processorSection, extConfig.String(), extIDs.String()), 0o644))
	c.cmd = exec.Command(bin, "--config", cfg)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	require.NoError(t, c.cmd.Start())
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
		if t.Failed() {
			// A password or token in the configuration must not reach the
			// test output, even if the collector logged it.
			t.Logf("collector log:\n%s", strings.NewReplacer(testPassword, "xxxxx", testToken, "xxxxx").Replace(c.log.String()))
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + c.healthAddr + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the health check never answered 200")
	return c
}

// stop shuts the collector down gracefully, so that the processor analyses
// what it buffered and the file exporter flushes.
func (c *collector) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(os.Interrupt))
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the collector did not stop within 30s")
	}
}

// post sends td to the collector over OTLP/HTTP, as an SDK's exporter does.
func (c *collector) post(t *testing.T, td ptrace.Traces) {
	t.Helper()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	resp, err := http.Post("http://"+c.httpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// metric sums the samples of a Prometheus metric whose name starts with
// name and whose labels contain every want label.
func (c *collector) metric(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + c.metricsAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		match := true
		for _, w := range want {
			match = match && strings.Contains(line, w)
		}
		if !match {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err, line)
		sum += v
	}
	return sum
}

// scenarioRequests reads a scenario file's requests, one per line.
func scenarioRequests(t *testing.T, name string) []ptrace.Traces {
	t.Helper()
	var reqs []ptrace.Traces
	require.NoError(t, otlpfile.ReadFile(filepath.Join(repoRoot, "testdata", "scenarios", name+".json"), func(td ptrace.Traces) { reqs = append(reqs, td) }))
	return reqs
}

func canonicalJSON(t *testing.T, td ptrace.Traces) string {
	t.Helper()
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return string(b)
}

func TestCollectorEndToEnd(t *testing.T) {
	bin := buildCollector(t)
	c := startCollector(t, bin)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient(c.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	grpcClient := ptraceotlp.NewGRPCClient(conn)
	sendGRPC := func(td ptrace.Traces) {
		_, err := grpcClient.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		require.NoError(t, err)
	}
	sendHTTP := func(td ptrace.Traces) { c.post(t, td) }
	verdicts := func(kind string) float64 {
		return c.metric(t, "otelcol_processor_errorownership_verdicts", `verdict="`+kind+`"`)
	}
	analysed := func() float64 { return c.metric(t, "otelcol_processor_errorownership_traces_analyzed") }

	var sent []string
	spans, traces := 0, 0
	send := func(td ptrace.Traces, over func(ptrace.Traces)) {
		over(td)
		sent = append(sent, canonicalJSON(t, td))
		spans += td.SpanCount()
		traces++ // each line of a scenario file is one trace
	}

	// The chain of docs/design.md §1 over OTLP/HTTP: d owns every error, whatever the
	// edges are learned as, so the counts are exact in any order.
	for _, td := range scenarioRequests(t, "chain_retry_every_hop") {
		send(td, sendHTTP)
	}
	// The coincidental story over OTLP/gRPC, twice: traces are analysed in
	// no fixed order, so in the first pass some coincidental errors meet an
	// edge not yet learned (and count as propagated); in the second the
	// model knows recommendations is fail-open, and every one of the ten is
	// coincidental.
	coincidental := scenarioRequests(t, "coincidental")
	for _, td := range coincidental {
		send(td, sendGRPC)
	}
	require.Eventually(t, func() bool { return analysed() == float64(traces) }, time.Minute, 100*time.Millisecond, "traces analysed")
	require.Equal(t, float64(spans), c.metric(t, "otelcol_processor_errorownership_spans_seen"), "spans seen")
	// Own verdicts depend on no model: they are exact after one pass.
	assert.Equal(t, scenarioVerdicts(t, "chain_retry_every_hop")["own"]+scenarioVerdicts(t, "coincidental")["own"], verdicts("own"), "own")
	firstPass := verdicts("coincidental")
	for _, td := range coincidental {
		scenario.Restamp(td, 0xee)
		send(td, sendGRPC)
	}
	require.Eventually(t, func() bool { return analysed() == float64(traces) }, time.Minute, 100*time.Millisecond, "traces analysed")
	assert.Equal(t, 10.0, verdicts("coincidental")-firstPass, "the learned model turns would-be propagated errors into coincidental ones")
	// Every failed inbound span got one verdict: the chain's 150, and the
	// coincidental story's failed requests twice.
	want := total(scenarioVerdicts(t, "chain_retry_every_hop")) + 2*total(scenarioVerdicts(t, "coincidental"))
	assert.Equal(t, want, verdicts("own")+verdicts("propagated")+verdicts("coincidental"), "verdicts")
	assert.Zero(t, c.metric(t, "otelcol_processor_errorownership_panics_recovered"))
	c.stop(t)

	// Every span came out unchanged: each request is one line of the file
	// exporter's output, identical once both are marshalled the same way.
	var got []string
	require.NoError(t, otlpfile.ReadFile(c.outFile, func(td ptrace.Traces) { got = append(got, canonicalJSON(t, td)) }))
	slices.Sort(got)
	slices.Sort(sent)
	require.Equal(t, len(sent), len(got), "requests out")
	for i := range sent {
		require.JSONEq(t, sent[i], got[i])
	}
}

// scenarioVerdicts sums a scenario's expected verdicts by kind.
func scenarioVerdicts(t *testing.T, name string) map[string]float64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "scenarios", name+".expected.json"))
	require.NoError(t, err)
	var e scenario.Expected
	require.NoError(t, json.Unmarshal(raw, &e))
	out := map[string]float64{}
	for _, svc := range e.Services {
		for kind, n := range svc.Verdicts {
			out[kind] += float64(n)
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	n := 0.0
	for _, v := range m {
		n += v
	}
	return n
}

// TestShippedConfigsValidate checks that the configurations the README and
// `make run` use are accepted by the built collector.
func TestShippedConfigsValidate(t *testing.T) {
	bin := buildCollector(t)
	for _, name := range []string{"otelcol-config.yaml", "otelcol-kafka-front.yaml", "otelcol-kafka-analysis.yaml"} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(bin, "validate", "--config", filepath.Join(repoRoot, "testdata", name)).CombinedOutput()
			assert.NoError(t, err, "%s", out)
		})
	}
}
