// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// WriteFiles writes every scenario to dir: NAME.json holds its traces, one
// OTLP JSON ExportTraceServiceRequest per line and per trace, and
// NAME.expected.json its story and Expected figures.
func WriteFiles(dir string) error {
	for _, s := range All() {
		data, err := MarshalTraces(s.Traces)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, s.Name+".json"), data, 0o644); err != nil {
			return err
		}
		doc := struct {
			Name  string `json:"name"`
			Story string `json:"story"`
			Expected
		}{s.Name, s.Story, s.Expected}
		exp, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, s.Name+".expected.json"), append(exp, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// MarshalTraces encodes td as OTLP JSON lines: one ExportTraceServiceRequest
// per run of consecutive ResourceSpans whose first spans share a trace ID,
// which for a World's output is one line per trace.
func MarshalTraces(td ptrace.Traces) ([]byte, error) {
	var out bytes.Buffer
	var m ptrace.JSONMarshaler
	rss := td.ResourceSpans()
	for lo := 0; lo < rss.Len(); {
		id := firstTraceID(rss.At(lo))
		hi := lo + 1
		for hi < rss.Len() && firstTraceID(rss.At(hi)) == id {
			hi++
		}
		batch := ptrace.NewTraces()
		for i := lo; i < hi; i++ {
			rss.At(i).CopyTo(batch.ResourceSpans().AppendEmpty())
		}
		line, err := m.MarshalTraces(batch)
		if err != nil {
			return nil, err
		}
		out.Write(line)
		out.WriteByte('\n')
		lo = hi
	}
	return out.Bytes(), nil
}

// firstTraceID is the trace ID of the first span of rs, zero if none.
func firstTraceID(rs ptrace.ResourceSpans) [16]byte {
	for i := 0; i < rs.ScopeSpans().Len(); i++ {
		if spans := rs.ScopeSpans().At(i).Spans(); spans.Len() > 0 {
			return spans.At(0).TraceID()
		}
	}
	return [16]byte{}
}

// Restamp puts generation gen into the first four bytes of every trace ID
// in td, so that the same traces can be sent again as new ones, as a live
// pipeline would see them, rather than as late spans of traces seen before.
func Restamp(td ptrace.Traces, gen uint32) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				id := sp.TraceID()
				binary.BigEndian.PutUint32(id[:4], gen)
				sp.SetTraceID(id)
			}
		}
	}
}
