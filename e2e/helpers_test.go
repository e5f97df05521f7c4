// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/errorownership/errorownership/internal/portlock"
	"github.com/errorownership/errorownership/internal/testsupport/collectorproc"
)

const repoRoot = ".."

// buildCollector runs `make otelcol` and returns the binary's path. The
// build takes a minute or more when cold; make skips it when nothing changed.
func buildCollector(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := collectorproc.Build(ctx, repoRoot)
	require.NoError(t, err)
	return bin
}

// freePort reserves a loopback port for a server this test starts, or for
// one it expects nothing to listen on, until the test ends: no other test
// process of ours gets it meanwhile (internal/portlock).
func freePort(t *testing.T) int {
	t.Helper()
	p, err := portlock.Reserve()
	require.NoError(t, err)
	t.Cleanup(p.Release)
	return p.Number()
}

// collector is the built collector started with configTemplate.
type collector struct {
	*collectorproc.Process
	grpcAddr, httpAddr string
	outFile            string
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
// no store. A test lasts seconds, not days: a verdict resting on an edge
// that the test's spans never teach a mode is judged for the last time
// after 5s, not rejudge's 10m.
const defaultProcessor = `    decision_wait: 300ms
    flush_interval: 1s
    edge_model:
      half_life: 0s
    rejudge:
      max_age: 5s`

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
	healthAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	metricsPort := freePort(t)
	c := &collector{
		grpcAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		httpAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		outFile:  filepath.Join(t.TempDir(), "out.json"),
	}
	c.Process = startConfigured(t, bin, fmt.Sprintf(configTemplate, healthAddr, c.grpcAddr, c.httpAddr, c.outFile, metricsPort, processorSection, extConfig.String(), extIDs.String()),
		healthAddr, fmt.Sprintf("127.0.0.1:%d", metricsPort))
	return c
}

// startConfigured starts the collector with the configuration text,
// whose health check is at healthAddr and telemetry at metricsAddr, and
// waits for its health check. It is killed when the test ends if it still
// runs, and its log is shown if the test failed.
func startConfigured(t *testing.T, bin, config, healthAddr, metricsAddr string) *collectorproc.Process {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(config), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := collectorproc.Start(ctx, bin, collectorproc.Options{
		Name: "collector", Configs: []string{cfg}, HealthAddr: healthAddr, MetricsAddr: metricsAddr,
	})
	if err != nil {
		// The error quotes the collector's log, which must not show a
		// password or token given in the configuration.
		t.Fatal(hideSecrets(err.Error()))
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("collector log:\n%s", hideSecrets(p.Log()))
		}
	})
	return p
}

// hideSecrets replaces the tests' password and token in s.
func hideSecrets(s string) string {
	return strings.NewReplacer(testPassword, "xxxxx", testToken, "xxxxx").Replace(s)
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

// stop shuts the collector down gracefully, so that the processor analyses
// what it buffered and the file exporter flushes.
func (c *collector) stop(t *testing.T) {
	t.Helper()
	_, err := c.Terminate(30 * time.Second)
	require.NoError(t, err)
}

// metric sums the samples of a Prometheus metric whose name starts with
// name and whose labels contain every want label; -1 while the telemetry
// cannot be read.
func (c *collector) metric(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	v, err := c.Metric(name, want...)
	if err != nil {
		return -1
	}
	return v
}

// terminate sends SIGTERM and waits for the collector to exit, failing the
// test if it has not within limit. It returns how long it took and the
// collector's log.
func terminate(t *testing.T, c *collector, limit time.Duration) (took time.Duration, log string) {
	t.Helper()
	took, err := c.Terminate(limit)
	if took >= limit {
		t.Fatalf("the collector was still running %v after SIGTERM", limit)
	}
	t.Logf("the collector exited %v after SIGTERM (%v)", took.Round(time.Millisecond), err)
	return took, c.Log()
}

// appService is a running service process of a test app (the shop, the
// polyglot chain): it says where it listens on the first line of its
// standard output, and logs to its standard error.
type appService struct {
	name, addr string
	cmd        *exec.Cmd
	log        *bytes.Buffer
}

// startApp starts argv as the service name, with the OpenTelemetry SDK's
// standard variables for the service name, the exporter's endpoint otlp
// and quick batching, and env, and waits until it says where it listens.
func startApp(t *testing.T, name, otlp string, argv []string, env ...string) *appService {
	t.Helper()
	s := &appService{name: name, log: &bytes.Buffer{}}
	s.cmd = exec.Command(argv[0], argv[1:]...) //nolint:gosec // G204: the test app's services, as the test builds them
	s.cmd.Env = append(os.Environ(), append([]string{
		"OTEL_SERVICE_NAME=" + name,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + otlp,
		"OTEL_BSP_SCHEDULE_DELAY=200",
		"OTEL_BSP_MAX_QUEUE_SIZE=65536",
	}, env...)...)
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	s.cmd.Stderr = s.log
	require.NoError(t, s.cmd.Start())
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("%s log (end):\n%s", name, tail(s.log.String(), 8<<10))
		}
	})
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case line := <-lines:
		s.addr = strings.TrimSpace(line)
	case <-time.After(90 * time.Second): // a JVM with the Java agent takes seconds
	}
	require.NotEmpty(t, s.addr, "%s did not say where it listens: %s", name, tail(s.log.String(), 4<<10))
	return s
}

// errDidNotStop is terminate's error for a service still running 30 s after
// its SIGTERM.
var errDidNotStop = errors.New("did not stop within 30s of SIGTERM")

// terminate ends the service with SIGTERM, which makes it export its last
// spans, and returns how it exited.
func (s *appService) terminate(t *testing.T) error {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("%s: %w", s.name, errDidNotStop)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// driveRoots sends n root requests, GET url(i) for i from 1 to n, from conc
// goroutines, and hands each answer to seen (if not nil) before its body is
// read.
func driveRoots(t *testing.T, n, conc int, url func(i int) string, seen func(*http.Response)) {
	t.Helper()
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				res, err := client.Get(url(int(i)))
				if !assert.NoError(t, err) {
					return
				}
				if seen != nil {
					seen(res)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
	wg.Wait()
}
