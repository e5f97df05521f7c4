// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoCommandRegistered: the root command has demo with its flags (the
// demo itself is tested in package simulation).
func TestDemoCommandRegistered(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"demo", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--dsn", "--keep", "--chain-requests", "--checkout-requests", "--sample", "--topology", "--report"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("demo --help lacks %s:\n%s", flag, out.String())
		}
	}
}

// TestDemoTopologyReport runs a short demo on a topology of its own with
// --report, and has a real browser (headless Chromium) open the page:
// every chart and the graph load and are drawn.
func TestDemoTopologyReport(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	out, stderr, err := runCLI(t, "demo", "--topology", shopTopology, "--report", dir,
		"--chain-requests", "200", "--checkout-requests", "1000", "--availability-requests", "5000")
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{
		"topology with root web, 5 services",
		"/topology/retry_every_hop",
		// The services in the topology's order, and its predicted figures.
		"policy   web   ads   api    db  cache",
		"theory  1.00  1.30  2.08  2.14   2.60",
		"Report: " + dir + "/index.html",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{reportAmplification, reportAvailability, reportGraph} {
		b, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // G304: a report the demo wrote into the test's directory
		if err != nil {
			t.Fatal(err)
		}
		svgTitles(t, b) // well-formed XML with an svg root
	}

	// The page, served as a browser is served it, reports what it drew.
	page, err := os.ReadFile(filepath.Join(dir, reportPage)) //nolint:gosec // G304: the page the demo wrote into the test's directory
	if err != nil {
		t.Fatal(err)
	}
	probe := `<script>window.addEventListener("load", () => {
  const imgs = [...document.images].map(i => i.getAttribute("src") + ":" + (i.naturalWidth > 100 && i.naturalHeight > 100 ? "drawn" : "missing"));
  const out = document.createElement("pre"); out.id = "loaded"; out.textContent = imgs.join(",");
  document.body.appendChild(out);
});</script></body>`
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" || r.URL.Path == "/"+reportPage {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(bytes.Replace(page, []byte("</body>"), []byte(probe), 1))
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dom := string(runChromium(t, bin, srv.URL+"/"+reportPage, "--dump-dom", "--virtual-time-budget=10000"))
	want := `<pre id="loaded">amplification.svg:drawn,availability.svg:drawn,graph.svg:drawn</pre>`
	if !strings.Contains(dom, want) {
		t.Errorf("the browser did not draw every figure: want %s in\n%s", want, dom)
	}
}

// TestDemoSampleFlag: --sample outside (0, 1] is refused before anything
// starts, naming what it takes.
func TestDemoSampleFlag(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"zero keeps nothing", "0"},
		{"negative", "-0.1"},
		{"above one", "1.5"},
		{"not a number", "NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, "demo", "--sample", tc.value)
			if err == nil || !strings.Contains(err.Error(), "give the share of traces to keep, in (0, 1]") {
				t.Errorf("demo --sample %s: %v, want the range named", tc.value, err)
			}
		})
	}
}
