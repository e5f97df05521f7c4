// Package otlpfile reads OTLP trace files: protobuf ExportTraceServiceRequest
// bodies as sent over OTLP/HTTP, and OTLP JSON as the collector's file
// exporter writes it (one request per line) or as a single document.
package otlpfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// ReadFile calls fn with each request in the file at path. The format is
// told by the content: a file that starts with '{' (after white space) is
// OTLP JSON, anything else protobuf. Errors name the file and where in it.
func ReadFile(path string, fn func(ptrace.Traces)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := Read(f, fn); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Read calls fn with each request read from r; see ReadFile.
func Read(r io.Reader, fn func(ptrace.Traces)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := firstNonSpace(br)
	if err == io.EOF {
		return nil // an empty file holds no spans
	}
	if err != nil {
		return err
	}
	if first == '{' {
		return readJSON(br, fn)
	}
	data, err := io.ReadAll(br)
	if err != nil {
		return err
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(data); err != nil {
		return fmt.Errorf("not an OTLP protobuf ExportTraceServiceRequest (nor OTLP JSON): %w", err)
	}
	fn(req.Traces())
	return nil
}

func firstNonSpace(br *bufio.Reader) (byte, error) {
	for i := 1; ; i++ {
		b, err := br.Peek(i)
		if err != nil {
			return 0, err
		}
		if c := b[i-1]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c, nil
		}
	}
}

// readJSON decodes successive JSON documents: one per line as the file
// exporter writes them, or one indented document.
func readJSON(r io.Reader, fn func(ptrace.Traces)) error {
	dec := json.NewDecoder(r)
	var um ptrace.JSONUnmarshaler
	for n := 1; ; n++ {
		start := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("OTLP JSON document %d (byte %d): %w", n, start, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || raw[0] != '{' {
			return fmt.Errorf("OTLP JSON document %d (byte %d): not a JSON object", n, start)
		}
		td, err := um.UnmarshalTraces(raw)
		if err != nil {
			return fmt.Errorf("OTLP JSON document %d (byte %d): %w", n, start, err)
		}
		fn(td)
	}
}
