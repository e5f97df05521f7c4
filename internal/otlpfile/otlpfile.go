// SPDX-License-Identifier: Apache-2.0

// Package otlpfile reads OTLP trace files: protobuf ExportTraceServiceRequest
// bodies as sent over OTLP/HTTP, the collector's file exporter's output —
// OTLP JSON (one request per line) or protobuf (`format: proto`: each
// request preceded by its length) — and OTLP JSON as a single document.
package otlpfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
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
// OTLP JSON, one that starts with a zero byte length-prefixed protobuf (a
// protobuf message never starts with one), anything else one protobuf
// request. Errors name the file and where in it.
func ReadFile(path string, fn func(ptrace.Traces)) error {
	f, err := os.Open(path) //nolint:gosec // G304: reading the file the caller names is what ReadFile is for
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
	if b, err := br.Peek(1); err == nil && b[0] == 0 {
		return readDelimited(br, fn)
	}
	first, err := firstNonSpace(br)
	if errors.Is(err, io.EOF) {
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

// maxDelimited bounds the length a length-prefixed message may announce, so
// that a file in another format cannot make the reader allocate gigabytes.
const maxDelimited = 256 << 20

// readDelimited decodes protobuf requests each preceded by its length, a
// 4-byte big-endian unsigned integer, as the file exporter's proto format
// writes them.
func readDelimited(r io.Reader, fn func(ptrace.Traces)) error {
	var um ptrace.ProtoUnmarshaler
	var offset int64
	var size [4]byte
	for i := 1; ; i++ {
		if _, err := io.ReadFull(r, size[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("protobuf message %d (byte %d): truncated length: %w", i, offset, err)
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > maxDelimited {
			return fmt.Errorf("protobuf message %d (byte %d): %d bytes announced, more than %d: not a length-prefixed OTLP file", i, offset, n, maxDelimited)
		}
		// A buffer per message: the decoded request may refer to it.
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("protobuf message %d (byte %d): %d bytes announced: %w", i, offset, len(buf), err)
		}
		td, err := um.UnmarshalTraces(buf)
		if err != nil {
			return fmt.Errorf("protobuf message %d (byte %d): %w", i, offset, err)
		}
		fn(td)
		offset += int64(len(size) + len(buf))
	}
}
