// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-graphviz"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/store/pgtest"
)

// TestGraphGolden: DOT and Mermaid, for the store's graph (the fixture)
// and for a topology.
func TestGraphGolden(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"store.dot", append([]string{"--dsn", dsn}, fixtureWindow...)},
		{"store.mmd", append([]string{"--dsn", dsn, "--format", "mermaid"}, fixtureWindow...)},
		{"store_around_c.dot", append([]string{"--dsn", dsn, "--service", "c"}, fixtureWindow...)},
		{"shop.dot", []string{"--topology", shopTopology}},
		{"shop.mmd", []string{"--topology", shopTopology, "--format", "mermaid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runCLI(t, append([]string{"graph"}, tc.args...)...)
			require.NoError(t, err, stderr)
			golden(t, "graph/"+tc.name, out)
		})
	}
}

// graphNodes parses DOT with Graphviz's own parser and returns its nodes
// and edges, as "tail -> head".
func graphNodes(t *testing.T, dot []byte) (nodes, edges []string) {
	t.Helper()
	g, err := graphviz.ParseBytes(dot)
	require.NoError(t, err, "the DOT parses:\n%s", dot)
	defer g.Close()
	n, err := g.FirstNode()
	for ; err == nil && n != nil; n, err = g.NextNode(n) {
		name, nerr := n.Name()
		require.NoError(t, nerr)
		nodes = append(nodes, name)
		e, eerr := g.FirstOut(n)
		for ; eerr == nil && e != nil; e, eerr = g.NextOut(e) {
			head, herr := e.Head()
			require.NoError(t, herr)
			hn, _ := head.Name()
			edges = append(edges, name+" -> "+hn)
		}
		require.NoError(t, eerr)
	}
	require.NoError(t, err)
	slices.Sort(nodes)
	slices.Sort(edges)
	return nodes, edges
}

// TestGraphDOTParses: Graphviz reads back every service and every edge,
// whatever the names hold.
func TestGraphDOTParses(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	out, stderr, err := runCLI(t, append([]string{"graph", "--dsn", dsn}, fixtureWindow...)...)
	require.NoError(t, err, stderr)
	nodes, edges := graphNodes(t, []byte(out))
	assert.Equal(t, []string{"a", "b", "c", "checkout", "d", "e", "f", "g", "payments", "recommendations"}, nodes)
	assert.Equal(t, []string{"a -> b", "b -> c", "c -> d", "checkout -> payments", "checkout -> recommendations",
		"d -> e", "e -> f", "f -> g"}, edges)

	// Names with quotes, backslashes and line breaks neither break the
	// syntax nor merge: the IDs keep DOT's escapes of backslashes and line
	// breaks (a DOT ID has none of its own), the labels show the names.
	odd := &serviceGraph{Title: `a "title"`, Nodes: []graphNode{{Service: `say "hi"\`}, {Service: "two\nlines"}, {Service: `two\nlines`}},
		Edges: []graphEdge{{From: `say "hi"\`, To: "two\nlines", Mode: "fail_open", Calls: 3}}}
	var dot bytes.Buffer
	require.NoError(t, odd.writeDOT(&dot))
	nodes, edges = graphNodes(t, dot.Bytes())
	assert.Equal(t, []string{`say "hi"\\`, `two\\nlines`, `two\nlines`}, nodes)
	assert.Equal(t, []string{`say "hi"\\ -> two\nlines`}, edges)
}

// renderGraph runs graph with a rendered format into a file.
func renderGraph(t *testing.T, format string, args ...string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "graph."+format)
	_, stderr, err := runCLI(t, append([]string{"graph", "--format", format, "-o", path}, args...)...)
	require.NoError(t, err, stderr)
	b, err := os.ReadFile(path) //nolint:gosec // G304: the graph the CLI wrote into t.TempDir
	require.NoError(t, err)
	return b
}

// svgTitles checks that b is well-formed XML with an svg root and returns
// the titles of its node and edge groups (Graphviz titles each).
func svgTitles(t *testing.T, b []byte) (nodes, edges []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var root string
	var group string
	inTitle := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			if tok.Name.Local == "g" {
				for _, a := range tok.Attr {
					if a.Name.Local == "class" {
						group = strings.Fields(a.Value + " -")[0] // "node owns": a node
					}
				}
			}
			inTitle = tok.Name.Local == "title"
		case xml.CharData:
			if inTitle {
				switch group {
				case "node":
					nodes = append(nodes, string(tok))
				case "edge":
					edges = append(edges, string(tok))
				}
			}
		case xml.EndElement:
			inTitle = false
		}
	}
	assert.Equal(t, "svg", root)
	slices.Sort(nodes)
	slices.Sort(edges)
	return nodes, edges
}

// TestGraphSVGAndPNG: the SVG is well-formed XML holding every service and
// edge; the PNG decodes and shows the edges in their modes' colours.
func TestGraphSVGAndPNG(t *testing.T) {
	svg := renderGraph(t, "svg", "--topology", shopTopology)
	nodes, edges := svgTitles(t, svg)
	assert.Equal(t, []string{"ads", "api", "cache", "db", "web"}, nodes)
	assert.Equal(t, []string{"api->cache", "api->db", "web->ads", "web->api"}, edges)

	img, err := png.Decode(bytes.NewReader(renderGraph(t, "png", "--topology", shopTopology)))
	require.NoError(t, err)
	// Outlines and edges are stroked: pixels of the fail_close red and the
	// fail_open green, beyond the arrowheads' few.
	assert.Greater(t, countNear(img, color.RGBA{0xc0, 0x39, 0x2b, 0xff}), 400, "fail_close red")
	assert.Greater(t, countNear(img, color.RGBA{0x27, 0xae, 0x60, 0xff}), 150, "fail_open green")
}

// countNear counts the pixels within a small distance of c.
func countNear(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if a < 0xc000 {
				continue
			}
			d := abs(int(r>>8)-int(c.R)) + abs(int(g>>8)-int(c.G)) + abs(int(bl>>8)-int(c.B))
			if d <= 40 {
				n++
			}
		}
	}
	return n
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// chromium returns Debian's headless browser, skipping the test without
// it, or failing it when CI is set: CI must not pass by testing nothing.
// With -short (make test-unit) the browser is left out.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		if pgtest.InCI() {
			t.Fatal("needs chromium, which -short leaves out; CI must not pass by testing nothing: run make test, without -short")
		}
		t.Skip("needs chromium, which -short (make test-unit) leaves out; make test runs it")
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		if pgtest.InCI() {
			t.Fatalf("chromium is not installed (apt-get install chromium); CI is set, so this is a failure, not a skip")
		}
		t.Skip("chromium is not installed: apt-get install chromium")
	}
	return path
}

// runChromium runs headless Chromium on url with args, in a profile of
// its own, with nothing reaching for the network.
func runChromium(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...) //nolint:gosec // G204: the Chromium the test found, with the arguments it builds
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", stderr.String())
	return out
}

// TestGraphRendersInABrowser: a real browser (Debian's headless Chromium)
// draws the SVG: served from 127.0.0.1 inside a page, every node has a box
// laid out on the page and the edges a path, and a screenshot of the SVG
// file itself is not blank.
func TestGraphRendersInABrowser(t *testing.T) {
	bin := chromium(t)
	dsn := fixtureDSN(t, fixtureBucket)
	svg := renderGraph(t, "svg", append([]string{"--dsn", dsn}, fixtureWindow...)...)
	wantNodes, _ := svgTitles(t, svg)

	// The page measures what the browser laid out and writes it into the
	// DOM, which --dump-dom prints once the page has loaded.
	page := `<!doctype html><html><body>` + svgBody(svg) + `
<script>
const boxes = [...document.querySelectorAll("g.node")].map(g => {
  const r = g.getBoundingClientRect();
  return g.querySelector("title").textContent + ":" + (r.width > 10 && r.height > 10 ? "drawn" : "empty");
});
const paths = [...document.querySelectorAll("g.edge path")].filter(p => p.getTotalLength() > 10).length;
const out = document.createElement("pre");
out.id = "rendered";
out.textContent = boxes.sort().join(",") + ";edges=" + paths;
document.body.appendChild(out);
</script></body></html>`
	mux := http.NewServeMux()
	mux.HandleFunc("GET /graph.html", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	dom := string(runChromium(t, bin, "http://"+ln.Addr().String()+"/graph.html", "--dump-dom"))
	var want []string
	for _, n := range wantNodes {
		want = append(want, n+":drawn")
	}
	assert.Contains(t, dom, `<pre id="rendered">`+strings.Join(want, ",")+";edges=8</pre>")

	file := filepath.Join(t.TempDir(), "graph.svg")
	require.NoError(t, os.WriteFile(file, svg, 0o644))
	shot := filepath.Join(t.TempDir(), "graph.png")
	runChromium(t, bin, "file://"+file, "--screenshot="+shot, "--window-size=1400,900", "--hide-scrollbars")
	f, err := os.Open(shot) //nolint:gosec // G304: the screenshot Chromium wrote into t.TempDir
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Greater(t, countNear(img, color.RGBA{0xc0, 0x39, 0x2b, 0xff}), 200, "the fail_close edges and their services are drawn in red")
	assert.Greater(t, countNear(img, color.RGBA{0x27, 0xae, 0x60, 0xff}), 50, "checkout → recommendations is drawn in the fail_open green")
}

// svgBody returns the SVG without its XML prolog, to inline in HTML.
func svgBody(svg []byte) string {
	s := string(svg)
	if i := strings.Index(s, "<svg"); i >= 0 {
		return s[i:]
	}
	panic(fmt.Sprintf("no <svg> in %q", s))
}
